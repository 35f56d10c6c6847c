package e2b

import (
	"bytes"
	"encoding/json"
	"io"

	"github.com/airlock-dev/airlock/api"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
)

// Header carrying a private sandbox's traffic access token.
const headerTraffic = "E2b-Traffic-Access-Token"

// servePort proxies r to port of sandbox id through /v1's port route:
// anonymously for a sandbox with public ports (/v1 lets those through),
// with the traffic token (a /v1 ports-scope token) for a private one.
// Port 49999 is the code interpreter.
func (h *Handler) servePort(w http.ResponseWriter, r *http.Request, id, e2bID string, port int) {
	if port == InterpPort {
		h.serveInterp(w, r, id, e2bID)
		return
	}
	si, known := h.known.get(id)
	tok := r.Header.Get(headerTraffic)
	target, _ := url.Parse(h.cfg.API)
	prefix := "/v1/sandboxes/" + id + "/ports/" + strconv.Itoa(port)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = target.Scheme, target.Host
			pr.Out.URL.Path = prefix + pr.In.URL.Path
			pr.Out.URL.RawPath = prefix + pr.In.URL.EscapedPath()
			pr.Out.Host = pr.In.Host
			if si.maskHost != "" {
				pr.Out.Host = strings.ReplaceAll(si.maskHost, "${PORT}", strconv.Itoa(port))
			}
			for _, hd := range []string{headerTraffic, "X-Access-Token", "X-Api-Key", "Authorization", headerSbID, headerSbPort} {
				pr.Out.Header.Del(hd)
			}
			if tok != "" {
				pr.Out.Header.Set("Authorization", "Bearer "+tok)
			}
		},
		Transport:     h.cfg.HTTPClient.Transport,
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode < 400 {
				return nil
			}
			// An error of /v1 itself (the app's own answers pass as they are).
			switch v1Code(resp) {
			case api.CodeUnauthenticated, api.CodePermissionDenied:
				return errTraffic{missing: tok == ""}
			case api.CodeNotFound, api.CodeConflict, api.CodeClosed:
				return errNotRunningPort{}
			case api.CodeUnavailable:
				return errPortClosed{}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			switch err := err.(type) {
			case errTraffic:
				what := "is invalid"
				if err.missing {
					what = "is missing"
					if !known || !si.private {
						// Not a private sandbox's refusal: there is none to reach.
						notRunning(w, e2bID)
						return
					}
				}
				writeJSON(w, http.StatusForbidden, map[string]any{"sandboxId": e2bID, "code": http.StatusForbidden,
					"message": "Sandbox is secured with traffic access token. Token header 'e2b-traffic-access-token' " + what})
			case errPortClosed:
				writeJSON(w, http.StatusBadGateway, map[string]any{"sandboxId": e2bID, "port": port, "code": http.StatusBadGateway,
					"message": "The sandbox is running but port is not open"})
			default:
				notRunning(w, e2bID)
			}
		},
	}
	rp.ServeHTTP(w, r)
}

type errTraffic struct{ missing bool }

func (errTraffic) Error() string { return "traffic access token refused" }

type errNotRunningPort struct{}

func (errNotRunningPort) Error() string { return "sandbox not running" }

type errPortClosed struct{}

func (errPortClosed) Error() string { return "port not open" }

// v1Code is the code of resp when it is an error answer of /v1 (its JSON
// error body), "" when it is the app's. The body is left to read again.
func v1Code(resp *http.Response) string {
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(b), resp.Body), resp.Body}
	var eb api.ErrorBody
	if json.Unmarshal(b, &eb) != nil {
		return ""
	}
	return eb.Error.Code
}

// serveInterp answers the code interpreter's port.
func (h *Handler) serveInterp(w http.ResponseWriter, r *http.Request, id, e2bID string) {
	if h.cfg.CodeInterpreter == nil {
		writeErr(w, http.StatusNotImplemented, "the code interpreter (port %d) is not available on this server", InterpPort)
		return
	}
	tok := r.Header.Get("X-Access-Token")
	if tok == "" {
		tok = r.Header.Get(headerTraffic)
	}
	if tok == "" {
		si, ok := h.known.get(id)
		if !ok || si.private {
			writeJSON(w, http.StatusForbidden, map[string]any{"sandboxId": e2bID, "code": http.StatusForbidden,
				"message": "Sandbox is secured with traffic access token. Token header 'e2b-traffic-access-token' is missing"})
			return
		}
		tok = si.token
	}
	h.cfg.CodeInterpreter(w, r, h.client(tok), id)
}
