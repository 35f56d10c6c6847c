package microvm

import (
	"testing"

	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/sandbox/sandboxtest"
)

// TestConformance runs the backend conformance suite on microVMs (TCG in
// CI: every sandbox after the first of its size is restored from a
// template).
func TestConformance(t *testing.T) {
	if raceEnabled {
		// The suite drives the agent client, which the native and gVisor
		// conformance runs already put under -race; under TCG it costs
		// minutes. The microvm-specific concurrency (teardown, timeout,
		// templates) runs under -race in this package's other tests, and
		// this suite runs in the plain pass of make test.
		t.Skip("covered without -race (make test's plain pass); see the comment")
	}
	b := testBackend(t, false)
	sandboxtest.Run(t, b, sandboxtest.Options{
		Spec: func(t *testing.T) sandbox.Spec {
			// The suite checks the host's workspace while the sandbox runs:
			// writes in place (the protected mode has its own test).
			return sandbox.Spec{Policy: testPolicy(t, workspace(t), false)}
		},
		LeakCheck: func(t *testing.T, id string) error { return leaks(b, id) },
		Parallel:  4,
	})
}
