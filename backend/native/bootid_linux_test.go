package native

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/sandbox"
)

// TestBootIDPerLife: each sandbox life reads a boot id of its own (the
// kernel's form), stable while it lives, never the host's; the file it
// came from is not left in the sandbox's root, and the sandbox cannot
// write it.
func TestBootIDPerLife(t *testing.T) {
	b := testBackend(t)
	ctx := context.Background()
	host, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	ids := map[string]bool{strings.TrimSpace(string(host)): true}
	for range 2 {
		sb, err := b.Create(ctx, sandbox.Spec{ID: newID(t), Policy: testPolicy(t, workspace(t), nil)})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Destroy(ctx)
		run := func(script string) string {
			var out strings.Builder
			p, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{"sh", "-c", script}, Stdout: &out, Stderr: &out})
			if err != nil {
				t.Fatal(err)
			}
			p.Wait(ctx)
			return strings.TrimSpace(out.String())
		}
		id := run("cat /proc/sys/kernel/random/boot_id")
		if !uuid.MatchString(id) {
			t.Fatalf("boot id %q: not a version 4 UUID", id)
		}
		if ids[id] {
			t.Fatalf("boot id %q: the host's or another sandbox's", id)
		}
		ids[id] = true
		if again := run("cat /proc/sys/kernel/random/boot_id"); again != id {
			t.Fatalf("boot id changed within one life: %q then %q", id, again)
		}
		if out := run("ls -a / | grep airlock; echo x > /proc/sys/kernel/random/boot_id && echo written"); strings.Contains(out, "airlock") || strings.Contains(out, "written") {
			t.Fatalf("left in the root, or writable: %q", out)
		}
	}
}
