package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/sandbox"
)

// httpError is an error the HTTP layer itself decides (body too large,
// malformed JSON, method not allowed) with its status and code.
type httpError struct {
	status int
	code   string
	err    error
}

func (e *httpError) Error() string { return e.err.Error() }
func (e *httpError) Unwrap() error { return e.err }

func errTooLarge(what string, limit int64) error {
	return &httpError{http.StatusRequestEntityTooLarge, "too_large",
		fmt.Errorf("%s: larger than %d bytes: %w", what, limit, sandbox.ErrLimit)}
}

func errBadRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, "invalid", fmt.Errorf(format+": %w", append(args, sandbox.ErrInvalid)...)}
}

var errUnauthenticated = &httpError{http.StatusUnauthorized, "unauthenticated",
	fmt.Errorf("an API key is required (Authorization: Bearer KEY): %w", sandbox.ErrPermission)}

// statusOf is THE place where error kinds become HTTP statuses.
func statusOf(err error) (int, string) {
	var he *httpError
	switch {
	case errors.As(err, &he):
		return he.status, he.code
	case errors.Is(err, sandbox.ErrNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, sandbox.ErrInvalid):
		return http.StatusBadRequest, "invalid"
	case errors.Is(err, sandbox.ErrLimit):
		return http.StatusTooManyRequests, "limit_exceeded"
	case errors.Is(err, sandbox.ErrExists):
		return http.StatusConflict, "exists"
	case errors.Is(err, sandbox.ErrPermission):
		return http.StatusForbidden, "permission_denied"
	case errors.Is(err, sandbox.ErrNotSupported):
		return http.StatusNotImplemented, "not_supported"
	case errors.Is(err, sandbox.ErrClosed):
		return http.StatusGone, "closed"
	case errors.Is(err, sandbox.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, "timeout"
	case errors.Is(err, sandbox.ErrUnavailable):
		return http.StatusServiceUnavailable, "unavailable"
	case errors.Is(err, context.Canceled):
		return 499, "canceled"
	default:
		return http.StatusInternalServerError, "internal"
	}
}

// writeError answers err as JSON and counts it.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
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
