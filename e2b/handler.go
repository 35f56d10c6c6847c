package e2b

import (
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/airlock-dev/airlock/client"
)

// Ports of E2B's in-sandbox services.
const (
	EnvdPort     = 49983 // envd: process and filesystem RPC, /files, /health, /envs
	InterpPort   = 49999 // the code interpreter
	envdVersion  = "0.6.4"
	clientIDE2B  = "6532622b" // required by E2B's schema, deprecated, constant
	headerSbID   = "E2b-Sandbox-Id"
	headerSbPort = "E2b-Sandbox-Port"
)

// CodeInterpreter answers one request of E2B's code-interpreter protocol
// (port 49999) for sandbox id through c, a /v1 client authenticated as the
// caller.
type CodeInterpreter func(w http.ResponseWriter, r *http.Request, c *client.Client, id string)

// Config is what the adapter needs.
type Config struct {
	// API is the base URL of the /v1 API the adapter calls
	// ("http://airlock" for a unix socket reached through HTTPClient).
	API string
	// HTTPClient reaches API; shared by every caller's client.
	HTTPClient *http.Client
	// Domain is the sandbox domain handed to the SDKs ("e2b.example.com"
	// or "e2b.example.com:8443"): getHost(port) is PORT-ID.DOMAIN, and
	// requests for such hosts (and api.DOMAIN) are routed here. Empty:
	// the Host a request came to (hosts are then not routed).
	Domain string
	// CodeInterpreter serves port 49999; nil answers 501.
	CodeInterpreter CodeInterpreter
	Log             *slog.Logger
}

// Handler is the E2B endpoint: one http.Handler for the control API,
// envd and every sandbox port. Safe for concurrent use.
type Handler struct {
	cfg     Config
	control http.Handler
	envd    *envd
	known   infoCache
	kills   killSet
	log     *slog.Logger
}

// New returns the adapter for cfg.
func New(cfg Config) *Handler {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{cfg: cfg, log: cfg.Log}
	h.control = h.controlRoutes()
	h.envd = newEnvd(h)
	return h
}

// client is a /v1 client acting with credential key (an API key or a
// sandbox access token).
func (h *Handler) client(key string) *client.Client {
	c, err := client.New(h.cfg.API, client.WithHTTPClient(h.cfg.HTTPClient), client.WithAPIKey(key))
	if err != nil {
		panic("e2b: bad API base " + h.cfg.API) // New checked it
	}
	return c
}

// ServeHTTP routes r: to a sandbox port when it names one (the
// E2b-Sandbox-Id and E2b-Sandbox-Port headers, or a PORT-ID.DOMAIN host),
// else to the control API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e2bID, port, ok := h.target(r)
	if !ok {
		h.control.ServeHTTP(w, r)
		return
	}
	id, valid := fromE2BID(e2bID)
	if !valid {
		notRunning(w, e2bID)
		return
	}
	switch port {
	case EnvdPort:
		h.envd.serve(w, r, id, e2bID)
	default:
		h.servePort(w, r, id, e2bID, port)
	}
}

// target names the sandbox and port r is for, if any.
func (h *Handler) target(r *http.Request) (id string, port int, ok bool) {
	if sid, sp := r.Header.Get(headerSbID), r.Header.Get(headerSbPort); sid != "" && sp != "" {
		p, err := strconv.Atoi(sp)
		if err != nil || p < 1 || p > 65535 {
			return sid, 0, true // a sandbox request with a bad port: not the control API
		}
		return sid, p, true
	}
	if h.cfg.Domain == "" {
		return "", 0, false
	}
	host := strings.ToLower(r.Host)
	if hh, _, err := net.SplitHostPort(host); err == nil {
		host = hh
	}
	dom := strings.ToLower(h.cfg.Domain)
	if dh, _, err := net.SplitHostPort(dom); err == nil {
		dom = dh
	}
	label, found := strings.CutSuffix(host, "."+dom)
	if !found || strings.Contains(label, ".") {
		return "", 0, false
	}
	ps, sid, found := strings.Cut(label, "-")
	if !found || sid == "" {
		return "", 0, false
	}
	p, err := strconv.Atoi(ps)
	if err != nil || p < 1 || p > 65535 {
		return "", 0, false
	}
	return sid, p, true
}

// domain is the sandbox domain for answers to r.
func (h *Handler) domain(r *http.Request) string {
	if h.cfg.Domain != "" {
		return h.cfg.Domain
	}
	return r.Host
}
