package e2b

import (
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

// maxBody bounds a control-API request body.
const maxBody = 1 << 20

// controlRoutes is E2B's control API (both SDK generations: /sandboxes and
// /v2/sandboxes).
func (h *Handler) controlRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	for pattern, fn := range map[string]func(http.ResponseWriter, *http.Request, *client.Client){
		"POST /sandboxes":                 h.handleCreate,
		"POST /v2/sandboxes":              h.handleCreate,
		"GET /sandboxes":                  h.handleListLegacy,
		"GET /v2/sandboxes":               h.handleList,
		"GET /sandboxes/{id}":             h.handleGet,
		"DELETE /sandboxes/{id}":          h.handleKill,
		"POST /sandboxes/{id}/timeout":    h.handleTimeout,
		"POST /sandboxes/{id}/refreshes":  h.handleRefresh,
		"POST /sandboxes/{id}/connect":    h.handleConnect,
		"POST /v2/sandboxes/{id}/connect": h.handleConnect,
		"POST /sandboxes/{id}/resume":     h.handleResume,
		"POST /sandboxes/{id}/pause":      h.handlePause,
		"GET /sandboxes/{id}/metrics":     h.handleMetrics,
		"GET /sandboxes/metrics":          h.handleMetricsMany,
		"GET /sandboxes/{id}/logs":        h.handleLogs,
		"GET /v2/sandboxes/{id}/logs":     h.handleLogsV2,
		"PUT /sandboxes/{id}/network":     h.handleNetwork,
		"POST /sandboxes/{id}/fork":       h.handleFork,
		"POST /sandboxes/{id}/snapshots":  h.handleSnapshot,
		"GET /snapshots":                  h.handleSnapshots,
		"DELETE /templates/{id}":          h.handleDeleteTemplate,
		"GET /templates":                  h.handleTemplatesLegacy,
		"GET /v2/templates":               h.handleTemplates,
		"GET /templates/aliases/{alias}":  h.handleTemplateAlias,
	} {
		mux.HandleFunc(pattern, h.authed(fn))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, p := mux.Handler(r); p == "" {
			writeErr(w, http.StatusNotFound, "%s %s: no such endpoint", r.Method, r.URL.Path)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// authed gives fn a /v1 client acting with the caller's API key; without
// one the answer is E2B's 401.
func (h *Handler) authed(fn func(http.ResponseWriter, *http.Request, *client.Client)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := keyOf(r)
		if key == "" {
			writeErr(w, http.StatusUnauthorized, "missing or malformed API key: send an Airlock API key (or its e2b_ form) in X-API-Key")
			return
		}
		fn(w, r, h.client(key))
	}
}

// decode reads r's JSON body into v; an empty body leaves v as it is.
func decode(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return errInvalid("read body: %v", err)
	}
	if len(b) > maxBody {
		return errInvalid("body larger than %d bytes", maxBody)
	}
	if len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errInvalid("body: %v", err)
	}
	return nil
}

// sandboxOf resolves the {id} of r to a sandbox E2B may see: live or
// paused (a stopped one is gone, as in E2B: 404).
func sandboxOf(ctx context.Context, r *http.Request, c *client.Client) (*api.Sandbox, error) {
	e := r.PathValue("id")
	id, ok := fromE2BID(e)
	if !ok {
		return nil, errNotFound("sandbox %q", e)
	}
	sb, err := c.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if sb.State == "stopped" {
		return nil, errNotFound("sandbox %q", e)
	}
	return sb, nil
}

// isNotFound: err says the sandbox does not exist (for the caller).
func isNotFound(err error) bool {
	return statusOf(err) == http.StatusNotFound
}

// e2bState is E2B's state of sb: running or paused (frozen is E2B's
// pause that keeps memory).
func e2bState(sb *api.Sandbox) string {
	if sb.State == api.StatePaused || sb.State == api.StateFrozen {
		return "paused"
	}
	return "running"
}
