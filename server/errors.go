package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/objstore"
)

// httpError is an error whose code the HTTP layer itself decides (body
// too large, malformed JSON, method not allowed) rather than its kind. The
// status comes from the code (api's table).
type httpError struct {
	code string
	err  error
}

func (e *httpError) Error() string { return e.err.Error() }
func (e *httpError) Unwrap() error { return e.err }

func errTooLarge(what string, limit int64) error {
	return &httpError{api.CodeTooLarge, fmt.Errorf("%s: larger than %d bytes: %w", what, limit, sandbox.ErrLimit)}
}

func errBadRequest(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, sandbox.ErrInvalid)...)
}

var errUnauthenticated = &httpError{api.CodeUnauthenticated,
	fmt.Errorf("an API key is required (Authorization: Bearer KEY): %w", sandbox.ErrPermission)}

// statusOf is the server's one use of api's code table: the HTTP status
// and code that answer err.
func statusOf(err error) (int, string) {
	var he *httpError
	if errors.As(err, &he) {
		return api.StatusOf(he.code), he.code
	}
	var ce *objstore.CorruptError
	if errors.As(err, &ce) {
		return api.StatusOf(api.CodeCorrupt), api.CodeCorrupt
	}
	code, status := api.CodeOf(err)
	return status, code
}

// writeError answers err as JSON and counts it.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	err = callerOf(r).held.explain(err)
	status, code := statusOf(err)
	s.metrics.errors.WithLabelValues(code).Inc()
	if status >= 500 {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	} else {
		s.log.Debug("request refused", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorInfo{Code: code, Message: err.Error()}})
}

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
