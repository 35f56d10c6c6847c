package docker

import (
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/sandbox"
)

// TestSmokeHost runs a command in a sandbox without an image (the host's
// system dirs over the base image) and checks what it sees.
func TestSmokeHost(t *testing.T) {
	b := testBackend(t)
	ws := workspace(t)
	sb := create(t, b, sandbox.Spec{Policy: testPolicy(t, ws, direct)})
	st, out := sh(t, sb, "echo hi; id -u; cat /proc/self/status | grep -E '^(CapEff|NoNewPrivs|Seccomp):'; touch "+ws+"/x && echo wrote")
	t.Logf("status %+v\n%s", st, out)
	if st.Code != 0 || !strings.Contains(out, "hi") || !strings.Contains(out, "wrote") {
		t.Fatalf("status %+v out %q", st, out)
	}
	for _, want := range []string{"CapEff:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in %q", want, out)
		}
	}
}

// TestSmokeImage runs a command in a sandbox from the busybox image.
func TestSmokeImage(t *testing.T) {
	b := testBackend(t)
	img := busyboxImage(t, b)
	ws := workspace(t)
	sb := create(t, b, sandbox.Spec{Image: img, Policy: testPolicy(t, ws, direct)})
	st, out := sh(t, sb, "echo hi; ls /bin | head -3; readlink /bin/sh")
	t.Logf("status %+v\n%s", st, out)
	if st.Code != 0 || !strings.Contains(out, "/bin/busybox") {
		t.Fatalf("status %+v out %q", st, out)
	}
}
