package docker

import (
	"testing"

	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/sandbox/sandboxtest"
)

// TestConformance runs the backend conformance suite on Docker, with the
// host's system dirs over the base image (what `airlock run --backend
// docker` gives without an image).
func TestConformance(t *testing.T) {
	b := testBackend(t)
	sandboxtest.Run(t, b, sandboxtest.Options{
		Spec: func(t *testing.T) sandbox.Spec {
			// The suite checks the host's workspace while the sandbox runs:
			// writes in place (the overlay mode has its own test).
			return sandbox.Spec{Policy: testPolicy(t, workspace(t), direct)}
		},
		LeakCheck: func(t *testing.T, id string) error { return leaks(b, id) },
		Parallel:  4,
	})
}

// TestConformanceImage runs the suite again on a sandbox from an image
// (busybox: its own /bin/sh, no host system dirs).
func TestConformanceImage(t *testing.T) {
	b := testBackend(t)
	img := busyboxImage(t, b)
	sandboxtest.Run(t, b, sandboxtest.Options{
		Spec: func(t *testing.T) sandbox.Spec {
			return sandbox.Spec{Image: img, Policy: testPolicy(t, workspace(t), direct)}
		},
		LeakCheck: func(t *testing.T, id string) error { return leaks(b, id) },
		Parallel:  4,
	})
}
