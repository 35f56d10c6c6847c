package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/airlock-dev/airlock/errdefs"
)

// Error codes: the stable `code` of every error answer (ErrorInfo.Code).
// Clients decide by code, never by HTTP status: 404 is both "no such
// sandbox" and "no such command", the code tells them apart.
const (
	CodeInvalid         = "invalid"
	CodeNotFound        = "not_found"
	CodeCommandNotFound = "command_not_found"
	CodeCannotExecute   = "cannot_execute"
	CodeLimitExceeded   = "limit_exceeded"
	CodeTooLarge        = "too_large"
	// CodeInsufficientStorage (507): the server's own disk is low, so it
	// refuses new work rather than lose audit events.
	CodeInsufficientStorage  = "insufficient_storage"
	CodeExists               = "exists"
	CodePermissionDenied     = "permission_denied"
	CodeUnauthenticated      = "unauthenticated"
	CodeNotSupported         = "not_supported"
	CodeClosed               = "closed"
	CodeTimeout              = "timeout"
	CodeUnavailable          = "unavailable"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeCanceled             = "canceled"
	CodeInternal             = "internal"
	// CodeCorrupt (409): stored state (a checkpoint, a paused sandbox's
	// files) no longer matches the manifest of hashes recorded with it.
	CodeCorrupt = "corrupt"
	// CodeConflict (409): the sandbox is not in a state the request needs
	// (a rollback while it is being paused).
	CodeConflict = "conflict"
)

// errorCode is one row of the code table.
type errorCode struct {
	code   string
	status int
	// kind is what a client's error unwraps to for this code.
	kind error
	// match lists what an error must wrap (any of) to get this code on the
	// server; empty for codes only the HTTP layer gives (by name).
	match []error
}

// codes is THE table between error kinds and the API's codes and statuses,
// used by the server to answer and by the Go SDK to read answers. For a
// server error the first row whose match it wraps wins: sub-kinds come
// before their parents, and a sandbox that ended by its timeout (closed
// and timeout) answers closed.
var codes = []errorCode{
	{CodeCommandNotFound, http.StatusNotFound, errdefs.ErrCommandNotFound, []error{errdefs.ErrCommandNotFound}},
	{CodeCannotExecute, http.StatusForbidden, errdefs.ErrCannotExecute, []error{errdefs.ErrCannotExecute}},
	{CodeNotFound, http.StatusNotFound, errdefs.ErrNotFound, []error{errdefs.ErrNotFound}},
	{CodeInvalid, http.StatusBadRequest, errdefs.ErrInvalid, []error{errdefs.ErrInvalid}},
	{CodeLimitExceeded, http.StatusTooManyRequests, errdefs.ErrLimit, []error{errdefs.ErrLimit}},
	{CodeExists, http.StatusConflict, errdefs.ErrExists, []error{errdefs.ErrExists}},
	{CodePermissionDenied, http.StatusForbidden, errdefs.ErrPermission, []error{errdefs.ErrPermission}},
	{CodeNotSupported, http.StatusNotImplemented, errdefs.ErrNotSupported, []error{errdefs.ErrNotSupported}},
	{CodeClosed, http.StatusGone, errdefs.ErrClosed, []error{errdefs.ErrClosed}},
	{CodeTimeout, http.StatusGatewayTimeout, errdefs.ErrTimeout, []error{errdefs.ErrTimeout, context.DeadlineExceeded}},
	{CodeUnavailable, http.StatusServiceUnavailable, errdefs.ErrUnavailable, []error{errdefs.ErrUnavailable}},
	{CodeCanceled, 499, context.Canceled, []error{context.Canceled}},
	// Decided by the HTTP layer itself.
	{CodeTooLarge, http.StatusRequestEntityTooLarge, errdefs.ErrLimit, nil},
	{CodeInsufficientStorage, http.StatusInsufficientStorage, errdefs.ErrLimit, nil},
	{CodeUnauthenticated, http.StatusUnauthorized, errdefs.ErrPermission, nil},
	{CodeUnsupportedMediaType, http.StatusUnsupportedMediaType, errdefs.ErrInvalid, nil},
	{CodeMethodNotAllowed, http.StatusMethodNotAllowed, errdefs.ErrInvalid, nil},
	{CodeCorrupt, http.StatusConflict, errdefs.ErrInvalid, nil},
	{CodeConflict, http.StatusConflict, errdefs.ErrClosed, nil},
	{CodeInternal, http.StatusInternalServerError, nil, nil},
}

// CodeOf returns the code and HTTP status that answer err: the first row
// of the table whose kind err wraps, else internal (500).
func CodeOf(err error) (code string, status int) {
	for _, c := range codes {
		for _, m := range c.match {
			if errors.Is(err, m) {
				return c.code, c.status
			}
		}
	}
	return CodeInternal, http.StatusInternalServerError
}

// StatusOf returns the HTTP status of code (500 for an unknown code).
func StatusOf(code string) int {
	for _, c := range codes {
		if c.code == code {
			return c.status
		}
	}
	return http.StatusInternalServerError
}

// KindOf returns the error kind code stands for (an errdefs value, or
// context.Canceled), nil for internal and unknown codes.
func KindOf(code string) error {
	for _, c := range codes {
		if c.code == code {
			return c.kind
		}
	}
	return nil
}

// Codes lists every code, in table order (for documentation and tests).
func Codes() []string {
	out := make([]string, len(codes))
	for i, c := range codes {
		out[i] = c.code
	}
	return out
}
