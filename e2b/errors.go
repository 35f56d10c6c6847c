package e2b

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/errdefs"
)

// apiError is the body of every error answer of E2B's control API and of
// envd's HTTP endpoints: the SDKs read the numeric code (a 404 with any
// other body turns a "not found" branch into a generic error).
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// writeErr answers status with message in E2B's error shape.
func writeErr(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, apiError{Code: status, Message: fmt.Sprintf(format, args...)})
}

// statusOf is the HTTP status E2B's SDKs expect for err, an error of the
// /v1 client (its status, which /v1 derives from its code table) or one
// of this package's own kinds.
func statusOf(err error) int {
	var ce *client.Error
	if errors.As(err, &ce) && ce.Status >= 400 {
		switch ce.Status {
		case 499, http.StatusGone:
			return http.StatusNotFound // the sandbox ended meanwhile
		}
		return ce.Status
	}
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, errdefs.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, errdefs.ErrPermission):
		return http.StatusForbidden
	case errors.Is(err, errdefs.ErrExists), errors.Is(err, errdefs.ErrClosed):
		return http.StatusConflict
	case errors.Is(err, errdefs.ErrLimit):
		return http.StatusTooManyRequests
	case errors.Is(err, errdefs.ErrNotSupported):
		return http.StatusNotImplemented
	case errors.Is(err, errdefs.ErrUnavailable):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// messageOf is err's text without the /v1 client's decoration.
func messageOf(err error) string {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce.Message
	}
	return err.Error()
}

// writeFailure answers err in E2B's error shape.
func writeFailure(w http.ResponseWriter, err error) {
	st := statusOf(err)
	writeJSON(w, st, apiError{Code: st, Message: messageOf(err)})
}

// notRunning is envd's and the port proxy's answer for a sandbox that is
// not running (paused, killed, unknown): 502, which the SDKs read as "not
// running" (isRunning() false) rather than as a failure.
func notRunning(w http.ResponseWriter, e2bID string) {
	writeJSON(w, http.StatusBadGateway, map[string]any{"sandboxId": e2bID, "message": "The sandbox was not found", "code": http.StatusBadGateway})
}

// errNotFound makes a not-found error for what.
func errNotFound(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, errdefs.ErrNotFound)...)
}

// errInvalid makes an invalid-request error.
func errInvalid(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, errdefs.ErrInvalid)...)
}
