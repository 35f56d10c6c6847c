package agentbox

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/agent"
	"github.com/airlock-dev/airlock/backend/internal/undo"
	"github.com/airlock-dev/airlock/sandbox"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// The runtime dying during Hello fails the start as unavailable, naming
// what it left; the caller's deadline as a timeout.
func TestConnectFailureKinds(t *testing.T) {
	t.Run("runtime died", func(t *testing.T) {
		host, guest := net.Pipe()
		defer guest.Close()
		died := make(chan struct{})
		close(died)
		var u undo.Stack
		defer u.Run()
		_, err := Connect(context.Background(), host, agent.ClientOptions{SandboxID: "sb-1", Log: quiet()}, agent.GuestConfig{UID: -1, GID: -1},
			Runtime{What: "the thing", Died: died, Left: func() string { return "its last words" }}, &u)
		if !errors.Is(err, sandbox.ErrUnavailable) || err == nil || !contains(err.Error(), "the thing exited during start: its last words") {
			t.Fatalf("err = %v, want unavailable naming what it left", err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		host, guest := net.Pipe()
		defer guest.Close()
		go io.Copy(io.Discard, guest) // an agent that never answers
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		var u undo.Stack
		defer u.Run()
		_, err := Connect(ctx, host, agent.ClientOptions{SandboxID: "sb-1", Log: quiet()}, agent.GuestConfig{UID: -1, GID: -1},
			Runtime{What: "x", Died: make(chan struct{})}, &u)
		if !errors.Is(err, sandbox.ErrTimeout) {
			t.Fatalf("err = %v, want timeout", err)
		}
	})
	t.Run("broken channel", func(t *testing.T) {
		host, guest := net.Pipe()
		guest.Close()
		var u undo.Stack
		defer u.Run()
		_, err := Connect(context.Background(), host, agent.ClientOptions{SandboxID: "sb-1", Log: quiet()}, agent.GuestConfig{UID: -1, GID: -1},
			Runtime{What: "x", Died: make(chan struct{})}, &u)
		if !errors.Is(err, sandbox.ErrUnavailable) {
			t.Fatalf("err = %v, want unavailable", err)
		}
	})
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
