package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"connectrpc.com/connect"
)

// rpcErr is the Connect error for err, a /v1 error of a call for sc: the
// codes E2B's SDKs map to their exceptions. A sandbox that is no longer
// running is "unavailable" (the SDK's "sandbox is probably not running").
func rpcErr(ctx context.Context, sc *scope, err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	if errors.Is(err, context.Canceled) {
		return connect.NewError(connect.CodeCanceled, err)
	}
	msg := errors.New(messageOf(err))
	switch statusOf(err) {
	case http.StatusNotFound, http.StatusConflict:
		if _, ok := sc.running(context.WithoutCancel(ctx)); !ok {
			return connect.NewError(connect.CodeUnavailable, fmt.Errorf("sandbox %s is not running", sc.e2bID))
		}
		if statusOf(err) == http.StatusConflict {
			return connect.NewError(connect.CodeFailedPrecondition, msg)
		}
		return connect.NewError(connect.CodeNotFound, msg)
	case http.StatusBadRequest:
		return connect.NewError(connect.CodeInvalidArgument, msg)
	case http.StatusUnauthorized:
		return connect.NewError(connect.CodeUnauthenticated, msg)
	case http.StatusForbidden:
		return connect.NewError(connect.CodePermissionDenied, msg)
	case http.StatusTooManyRequests, http.StatusRequestEntityTooLarge, http.StatusInsufficientStorage:
		return connect.NewError(connect.CodeResourceExhausted, msg)
	case http.StatusNotImplemented:
		return connect.NewError(connect.CodeUnimplemented, msg)
	case http.StatusGatewayTimeout:
		return connect.NewError(connect.CodeDeadlineExceeded, msg)
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		return connect.NewError(connect.CodeUnavailable, msg)
	}
	return connect.NewError(connect.CodeInternal, msg)
}

// abort ends the response at once, without Connect's end-of-stream frame:
// what E2B's envd does when a sandbox dies under a stream, and what its
// SDKs read (with a 502 from /health) as "the sandbox was killed".
func abort() { panic(http.ErrAbortHandler) }
