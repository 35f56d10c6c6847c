package gvisor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/images/imagestest"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/sandbox/sandboxtest"
)

func imageSpec(t *testing.T, ws string, edit func(*policy.Policy)) sandbox.Spec {
	t.Helper()
	p, _ := policy.Profile("default")
	if edit != nil {
		edit(p)
	}
	return imagestest.Spec(t, imagestest.BusyboxRoot(t), p, ws)
}

func gsh(t *testing.T, sb sandbox.Sandbox, script string) string {
	t.Helper()
	var out bytes.Buffer
	p, err := sb.Exec(context.Background(), sandbox.ExecRequest{Args: []string{"/bin/sh", "-c", script}, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	p.Wait(context.Background())
	return strings.TrimSpace(out.String())
}

func TestImageSandbox(t *testing.T) {
	b := testBackend(t)
	b.cfg.WritableDir = t.TempDir()
	ws := workspace(t)
	os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("from the host"), 0o644)
	for _, protect := range []bool{false, true} {
		t.Run(fmt.Sprintf("protect_config=%v", protect), func(t *testing.T) {
			var edit func(*policy.Policy)
			if !protect {
				edit = direct
			}
			spec := imageSpec(t, ws, edit)
			spec.ID = newID(t)
			sb := create(t, b, spec)
			for _, c := range []struct{ script, want string }{
				{"pwd; cat /workspace/hello.txt", "/workspace\nfrom the host"},
				{"echo $IMAGE_VAR $HOME; cat /etc/hostname", "from-image /root\nbusybox"},
				{"echo new > /etc/motd && mkdir /opt && cat /etc/motd", "new"},
				{"echo w > /workspace/out-" + fmt.Sprint(protect) + ".txt && echo ok", "ok"},
				{"echo x > /workspace/.envrc 2>&1 && echo written", "written"},
			} {
				if out := gsh(t, sb, c.script); !strings.Contains(out, c.want) {
					t.Errorf("%q: %q, want %q", c.script, out, c.want)
				}
			}
			if syncer, ok := sb.(sandbox.Syncer); ok && protect {
				if _, err := syncer.Sync(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if b, err := os.ReadFile(filepath.Join(ws, "out-"+fmt.Sprint(protect)+".txt")); err != nil || string(b) != "w\n" {
				t.Errorf("workspace write on the host: %q %v", b, err)
			}
			_, err := os.Stat(filepath.Join(ws, ".envrc"))
			if protect && err == nil {
				t.Errorf(".envrc written back to the host despite protect_config")
			}
			os.Remove(filepath.Join(ws, ".envrc"))
			if err := sb.Destroy(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(b.cfg.WritableDir, spec.ID)); !os.IsNotExist(err) {
				t.Errorf("writable layer left: %v", err)
			}
			if err := leaks(b, spec.ID); err != nil {
				t.Error(err)
			}
		})
	}
	r := imagestest.BusyboxRoot(t)
	if got, err := os.ReadFile(filepath.Join(r.Layers[0], "etc/hostname")); err != nil || string(got) != "busybox\n" {
		t.Errorf("image layer changed: %q %v", got, err)
	}
}

// The conformance suite on a gVisor image sandbox.
func TestConformanceImage(t *testing.T) {
	b := testBackend(t)
	b.cfg.WritableDir = t.TempDir()
	sandboxtest.Run(t, b, sandboxtest.Options{
		Spec: func(t *testing.T) sandbox.Spec { return imageSpec(t, workspace(t), direct) },
		NotApplicable: map[string]string{
			"limits/memory": "the host memory limit covers gVisor's user-space kernel: exceeding it ends the whole sandbox (see TestMemoryLimitEndsSandbox)",
		},
		LeakCheck: func(t *testing.T, id string) error {
			if _, err := os.Stat(filepath.Join(b.cfg.WritableDir, id)); err == nil {
				return fmt.Errorf("writable layer of %s left", id)
			}
			return leaks(b, id)
		},
		Parallel: 4,
	})
}
