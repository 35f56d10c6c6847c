package server

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/store"
	"github.com/airlock-dev/airlock/server/token"
)

type ctxKey int

const (
	keyTrusted ctxKey = iota
	keyTenant
)

// caller is who makes a request.
type caller struct {
	tenant  string
	trusted bool // on the unix socket without a key: may name host paths
	// held is the sandbox the request works on, once looked up (change.go).
	held *heldLive
}

func callerOf(r *http.Request) caller {
	c, _ := r.Context().Value(keyTenant).(caller)
	return c
}

func (s *Server) withTrust(trusted bool, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyTrusted, trusted)))
	})
}

// authenticate sets the caller: a valid key's tenant (from the
// Authorization header or a console session made with it), or the local
// tenant on a trusted listener without a key.
func (s *Server) authenticate(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		trusted, _ := r.Context().Value(keyTrusted).(bool)
		c, key, err := s.requestCaller(r, trusted)
		if err == nil && !c.trusted {
			err = bindConn(r, c.tenant)
		}
		if err != nil {
			if errors.Is(err, sandbox.ErrLimit) {
				w.Header().Set("Connection", "close")
			}
			s.writeError(w, r, err)
			return
		}
		if !c.trusted {
			release, err := s.inflight.acquire(c.tenant, s.cfg.TenantRequests)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			defer release()
		}
		if key != "" {
			// A key revoked while this request runs (a stream) ends it.
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			defer s.keyWatch.track(key, cancel)()
			r = r.WithContext(ctx)
		}
		c.held = &heldLive{}
		h(w, r.WithContext(context.WithValue(r.Context(), keyTenant, c)))
	}
}

// requestCaller is who makes r, and the API key it is made with (if any).
func (s *Server) requestCaller(r *http.Request, trusted bool) (caller, string, error) {
	auth := r.Header.Get("Authorization")
	if auth != "" {
		key, ok := strings.CutPrefix(auth, "Bearer ")
		if !ok {
			return caller{}, "", errUnauthenticated
		}
		key = strings.TrimSpace(key)
		if strings.HasPrefix(key, token.SandboxPrefix) {
			tenant, err := s.sandboxTokenCaller(r, key)
			if err != nil {
				return caller{}, "", &httpError{api.CodeUnauthenticated, err}
			}
			return caller{tenant: tenant}, "", nil
		}
		tenant, err := s.store.Authenticate(r.Context(), key)
		if err != nil {
			return caller{}, "", &httpError{api.CodeUnauthenticated, err}
		}
		return caller{tenant: tenant}, key, nil
	}
	if trusted {
		return caller{tenant: store.LocalTenant, trusted: true}, "", nil
	}
	tenant, key, ok, err := s.consoleCaller(r)
	switch {
	case !ok:
		return caller{}, "", errUnauthenticated
	case err != nil:
		return caller{}, "", err
	case key != "":
		// Checked again each time: a revoked key ends its sessions.
		if tenant, err = s.store.Authenticate(r.Context(), key); err != nil {
			return caller{}, "", &httpError{api.CodeUnauthenticated, err}
		}
	}
	return caller{tenant: tenant}, key, nil
}

// route is one authenticated API endpoint.
type route struct {
	pattern string // "METHOD /path/{param}"
	h       http.HandlerFunc
}

// apiRoutes lists every authenticated endpoint; a test checks each is in
// api/openapi.yaml (and the document's are all answered).
func (s *Server) apiRoutes() []route {
	return append([]route{
		{"POST /v1/sandboxes", s.needsStorage(s.handleCreate)},
		{"GET /v1/sandboxes", s.handleList},
		{"GET /v1/sandboxes/{id}", s.handleGet},
		{"PATCH /v1/sandboxes/{id}", s.handlePatch},
		{"DELETE /v1/sandboxes/{id}", s.handleDelete},
		{"PUT /v1/sandboxes/{id}/network", s.handleNetwork},

		{"POST /v1/sandboxes/{id}/exec", s.needsStorage(s.handleExec)},
		{"GET /v1/sandboxes/{id}/processes", s.handleProcList},
		{"GET /v1/sandboxes/{id}/processes/{pid}", s.handleProcGet},
		{"DELETE /v1/sandboxes/{id}/processes/{pid}", s.handleProcDelete},
		{"POST /v1/sandboxes/{id}/processes/{pid}/signal", s.handleProcSignal},
		{"POST /v1/sandboxes/{id}/processes/{pid}/wait", s.handleProcWait},
		{"GET /v1/sandboxes/{id}/processes/{pid}/output", s.handleProcOutput},
		{"POST /v1/sandboxes/{id}/processes/{pid}/stdin", s.handleProcStdin},
		{"GET /v1/sandboxes/{id}/pty", s.needsStorage(s.handlePTY)},
		{"POST /v1/sandboxes/{id}/code", s.needsStorage(s.handleCode)},
		{"POST /v1/sandboxes/{id}/browser/navigate", s.handleBrowserNavigate},
		{"POST /v1/sandboxes/{id}/browser/screenshot", s.handleBrowserScreenshot},

		{"GET /v1/sandboxes/{id}/files", s.handleFileRead},
		{"PUT /v1/sandboxes/{id}/files", s.needsStorage(s.handleFileWrite)},
		{"DELETE /v1/sandboxes/{id}/files", s.handleFileRemove},
		{"GET /v1/sandboxes/{id}/files/stat", s.handleFileStat},
		{"GET /v1/sandboxes/{id}/files/list", s.handleFileList},
		{"POST /v1/sandboxes/{id}/files/rename", s.handleFileRename},
		{"POST /v1/sandboxes/{id}/files/mkdir", s.needsStorage(s.handleFileMkdir)},
		{"GET /v1/sandboxes/{id}/archive", s.handleArchiveGet},
		{"PUT /v1/sandboxes/{id}/archive", s.needsStorage(s.handleArchivePut)},

		{"GET /v1/sandboxes/{id}/events", s.handleEvents},
		{"POST /v1/sandboxes/{id}/port-tokens", s.handlePortToken},
		{"POST /v1/sandboxes/{id}/access-tokens", s.handleAccessToken},
		{"GET /v1/sandboxes/{id}/tcp/{port}", s.handleTCP},
		{"GET /v1/sandboxes/{id}/files/watch", s.handleFileWatch},
		{"POST /v1/volumes", s.handleVolumeCreate},
		{"GET /v1/volumes", s.handleVolumeList},
		{"GET /v1/volumes/{name}", s.handleVolumeGet},
		{"DELETE /v1/volumes/{name}", s.handleVolumeDelete},

		{"POST /v1/sandboxes/{id}/pause", s.handlePause},
		{"POST /v1/sandboxes/{id}/resume", s.needsStorage(s.handleResume)},
		{"POST /v1/sandboxes/{id}/checkpoints", s.needsStorage(s.handleCheckpointCreate)},
		{"GET /v1/sandboxes/{id}/checkpoints", s.handleCheckpointList},
		{"DELETE /v1/sandboxes/{id}/checkpoints/{checkpoint}", s.handleCheckpointDelete},
		{"POST /v1/sandboxes/{id}/rollback", s.needsStorage(s.handleRollback)},
		{"POST /v1/sandboxes/{id}/fork", s.needsStorage(s.handleFork)},
		{"POST /v1/sandboxes/{id}/snapshots", s.needsStorage(s.handleSnapshotCreate)},
		{"GET /v1/snapshots", s.handleSnapshotList},
		{"GET /v1/snapshots/{snapshot}", s.handleSnapshotGet},
		{"DELETE /v1/snapshots/{snapshot}", s.handleSnapshotDelete},
		{"POST /v1/snapshots/{snapshot}/sandboxes", s.needsStorage(s.handleSnapshotSandboxes)},
	}, s.imageRoutes()...)
}

// publicRoutes need no key.
var publicRoutes = []string{"GET /healthz", "GET /metrics", "GET /v1/openapi.yaml"}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(publicRoutes[0], s.handleHealth)
	mux.Handle(publicRoutes[1], s.metricsHandler())
	mux.HandleFunc(publicRoutes[2], func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		w.Write(api.OpenAPI)
	})
	s.consoleRoutes(mux)
	for _, rt := range s.apiRoutes() {
		mux.Handle(rt.pattern, s.metrics.instrument(rt.pattern, s.authenticate(rt.h)))
	}
	mux.Handle(portsPattern, s.metrics.instrument(portsPattern, http.HandlerFunc(s.handlePortProxy)))
	preview := s.metrics.instrument("preview", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, port, _ := s.previewTarget(r.Host)
		s.servePort(w, r, id, port, "", r.URL.EscapedPath())
	}))

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, _, ok := s.previewTarget(r.Host); ok {
			preview.ServeHTTP(w, r)
			return
		}
		if emptyID(r.URL.Path) {
			s.writeError(w, r, errBadRequest("%s %s: empty sandbox or process ID", r.Method, r.URL.Path))
			return
		}
		if _, pattern := mux.Handler(r); pattern == "" {
			s.notRouted(w, r, mux)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// emptyID reports a path under /v1/sandboxes/ with an empty segment
// ("/v1/sandboxes/", "/v1/sandboxes//exec"): a client sent an empty ID,
// which the mux would clean into another route or a 405.
func emptyID(p string) bool {
	rest, ok := strings.CutPrefix(p, "/v1/sandboxes/")
	segs := strings.Split(rest, "/")
	if len(segs) > 3 && segs[1] == "ports" {
		segs = segs[:3] // the rest is the app's path: /v1/sandboxes/ID/ports/PORT/...
	}
	return ok && slices.Contains(segs, "")
}

// notRouted answers 405 (JSON, with Allow) when the path exists for other
// methods, else 404 (JSON).
func (s *Server) notRouted(w http.ResponseWriter, r *http.Request, mux *http.ServeMux) {
	var allow []string
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		r2 := r.Clone(r.Context())
		r2.Method = m
		if _, p := mux.Handler(r2); p != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		s.writeError(w, r, &httpError{api.CodeMethodNotAllowed,
			errBadRequest("%s %s: method not allowed", r.Method, r.URL.Path)})
		return
	}
	s.writeError(w, r, &httpError{api.CodeNotFound,
		errBadRequest("%s %s: no such endpoint", r.Method, r.URL.Path)})
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	h := api.Health{Status: "ok", Backends: map[string]api.Probe{}}
	if why := s.storage.low(); why != "" {
		h.Status, h.Storage = "degraded", why
	}
	// Host details (kernel features, versions) are the operator's: only
	// on the local socket. Anyone on TCP, keyed or not, may ask whether
	// the server is up.
	trusted, _ := r.Context().Value(keyTrusted).(bool)
	if !trusted {
		writeJSON(w, http.StatusOK, h)
		return
	}
	for n, b := range s.cfg.Backends {
		h.Backends[n] = apiProbe(b.Probe(r.Context()))
	}
	writeJSON(w, http.StatusOK, h)
}
