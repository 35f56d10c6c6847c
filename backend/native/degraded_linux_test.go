package native

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// TestFailClosed proves that a protection the host lacks stops Create
// (naming what is missing, leaving nothing), and that allow_degraded starts
// anyway with a degraded audit event.
func TestFailClosed(t *testing.T) {
	for _, c := range []struct {
		name    string
		mutate  func(*Features)
		missing string
		events  int    // degraded events: the protection, and write mediation that needs it
		check   string // shell check inside the degraded sandbox, prints "weak" when the protection is absent
	}{
		{"no landlock", func(f *Features) { f.LandlockABI = 0 }, "landlock", 2, ""},
		{"no seccomp", func(f *Features) { f.Seccomp = false }, "seccomp", 2, "grep -q '^Seccomp:[[:space:]]*0' /proc/self/status && echo weak"},
		{"no addfd", func(f *Features) { f.SeccompAddFD = false }, "write mediation", 1, "touch .envrc && echo weak"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := testBackend(t)
			real := HostFeatures()
			b.features = func() Features { f := real; c.mutate(&f); return f }
			ws := workspace(t)
			id := newID(t)
			_, err := b.Create(context.Background(), sandbox.Spec{ID: id, Policy: testPolicy(t, ws, nil)})
			if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), c.missing) {
				t.Fatalf("err %v, want ErrUnavailable naming %s", err, c.missing)
			}
			if got := leaks(b, id, ""); len(got) > 0 {
				t.Fatalf("left behind: %v", got)
			}
			events := newEventLog()
			pol := testPolicy(t, ws, func(p *policy.Policy) { p.AllowDegraded = true })
			sb, err := b.Create(context.Background(), sandbox.Spec{ID: newID(t), Policy: pol, Audit: events})
			if err != nil {
				t.Fatalf("degraded create: %v", err)
			}
			defer sb.Destroy(context.Background())
			if n := events.count(audit.TypeDegraded); n != c.events {
				t.Fatalf("want %d degraded events, got %d", c.events, n)
			}
			if c.check != "" {
				if _, out := sh(t, sb, c.check); out != "weak" {
					t.Fatalf("degraded sandbox still has the protection? %q", out)
				}
			}
		})
	}
}
