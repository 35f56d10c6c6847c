package native

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/images/imagestest"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/sandbox/sandboxtest"
)

func TestConformance(t *testing.T) {
	testutil.RequireLinux(t)
	testutil.RequireRoot(t)
	// Own cgroup parent and state dir: the suite's Cleanup check removes
	// everything of this backend that it does not keep.
	parent := fmt.Sprintf("airlock-conformance-%d", os.Getpid())
	b := New(Config{AgentBinary: testutil.AirlockBinary(t), StateDir: t.TempDir(), CgroupParent: parent})
	t.Cleanup(func() {
		h := hostCgroups()
		if p := h.v2Parent(parent); p != "" {
			os.Remove(p)
		}
		for c := range h.v1Mount {
			os.Remove(h.v1Parent(c, parent))
		}
	})
	sandboxtest.Run(t, b, sandboxtest.Options{
		Spec: func(t *testing.T) sandbox.Spec {
			ws := workspace(t)
			return sandbox.Spec{Policy: testPolicy(t, ws, nil)}
		},
		LeakCheck: func(t *testing.T, id string) error {
			if got := leaks(b, id, ""); len(got) > 0 {
				return fmt.Errorf("left behind: %s", strings.Join(got, ", "))
			}
			return nil
		},
	})
}

// The same suite on image sandboxes: the busybox image's overlay root,
// the workspace at /workspace.
func TestConformanceImage(t *testing.T) {
	testutil.RequireLinux(t)
	testutil.RequireRoot(t)
	parent := fmt.Sprintf("airlock-conformance-image-%d", os.Getpid())
	b := New(Config{AgentBinary: testutil.AirlockBinary(t), StateDir: t.TempDir(), CgroupParent: parent, WritableDir: t.TempDir()})
	t.Cleanup(func() {
		h := hostCgroups()
		if p := h.v2Parent(parent); p != "" {
			os.Remove(p)
		}
		for c := range h.v1Mount {
			os.Remove(h.v1Parent(c, parent))
		}
	})
	sandboxtest.Run(t, b, sandboxtest.Options{
		Spec: func(t *testing.T) sandbox.Spec {
			p, _ := policy.Profile("default")
			return imagestest.Spec(t, imagestest.BusyboxRoot(t), p, workspace(t))
		},
		LeakCheck: func(t *testing.T, id string) error {
			got := leaks(b, id, "")
			if _, err := os.Stat(filepath.Join(b.cfg.WritableDir, id)); err == nil {
				got = append(got, "writable layer "+filepath.Join(b.cfg.WritableDir, id))
			}
			if len(got) > 0 {
				return fmt.Errorf("left behind: %s", strings.Join(got, ", "))
			}
			return nil
		},
	})
}
