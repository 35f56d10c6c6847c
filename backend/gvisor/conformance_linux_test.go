package gvisor

import (
	"testing"

	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/sandbox/sandboxtest"
)

// TestConformance runs the backend conformance suite on gVisor.
func TestConformance(t *testing.T) {
	b := testBackend(t)
	sandboxtest.Run(t, b, sandboxtest.Options{
		Spec: func(t *testing.T) sandbox.Spec {
			// The suite checks the host's workspace while the sandbox runs:
			// writes in place (the overlay mode has its own test).
			return sandbox.Spec{Policy: testPolicy(t, workspace(t), direct)}
		},
		NotApplicable: map[string]string{
			// gVisor's kernel and the application share one host cgroup:
			// the memory limit holds (TestMemoryLimitEndsSandbox), but the
			// host OOM killer ends the whole sandbox, not one process.
			"limits/memory": "the host memory limit covers gVisor's user-space kernel: exceeding it ends the whole sandbox (see TestMemoryLimitEndsSandbox)",
		},
		LeakCheck: func(t *testing.T, id string) error { return leaks(b, id) },
		Parallel:  4,
	})
}
