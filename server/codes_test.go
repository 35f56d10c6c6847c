package server

import (
	"context"
	"errors"
	"testing"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/errdefs"
)

// The client decides by the code the server sends, not by the status:
// a missing sandbox and a missing command are both 404, but only one of
// them is a command not found.
func TestErrorCodesDistinguishKinds(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Run(ctx, sb.ID, "no-such-command")
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != api.CodeCommandNotFound || !errors.Is(err, errdefs.ErrCommandNotFound) || !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("missing command: %v", err)
	}
	_, err = c.Run(ctx, "sb-execnope", "true")
	if !errors.As(err, &ce) || ce.Code != api.CodeNotFound || !errors.Is(err, errdefs.ErrNotFound) || errors.Is(err, errdefs.ErrCommandNotFound) {
		t.Fatalf("missing sandbox: %v", err)
	}
	// Streamed exec reports the same code in its error frame or answer.
	_, err = c.Exec(ctx, sb.ID, client.ExecOptions{Args: []string{"no-such-command"}})
	if !errors.Is(err, errdefs.ErrCommandNotFound) {
		t.Fatalf("streamed exec of a missing command: %v", err)
	}
}

// Every code of the table round-trips: the server's code for a kind is
// the one the client maps back to that kind.
func TestCodeTableRoundTrip(t *testing.T) {
	t.Parallel()
	for _, kind := range []error{errdefs.ErrNotFound, errdefs.ErrInvalid, errdefs.ErrUnavailable, errdefs.ErrLimit,
		errdefs.ErrExists, errdefs.ErrPermission, errdefs.ErrNotSupported, errdefs.ErrClosed, errdefs.ErrTimeout,
		errdefs.ErrCommandNotFound, errdefs.ErrCannotExecute, context.Canceled} {
		status, code := statusOf(errors.Join(errors.New("op x"), kind))
		if got := api.KindOf(code); got != kind {
			t.Errorf("%v: code %q maps back to %v", kind, code, got)
		}
		if status != api.StatusOf(code) || status < 400 {
			t.Errorf("%v: status %d for code %q", kind, status, code)
		}
	}
	if status, code := statusOf(errors.New("boom")); status != 500 || code != api.CodeInternal {
		t.Errorf("unknown error: %d %s", status, code)
	}
}
