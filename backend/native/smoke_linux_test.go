package native

import (
	"context"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

func TestDirectExecSmoke(t *testing.T) {
	b := testBackend(t)
	ws := workspace(t)
	code, out := runDirect(t, b, testPolicy(t, ws, nil), "/bin/sh", "-c", "id; echo hi > x; cat x; ls /; cat /proc/self/status | grep -i -e cap -e seccomp -e NoNew")
	t.Logf("code %d\n%s", code, out)
	if code != 0 {
		t.Fatal("exit", code)
	}
}

func TestAgentSmoke(t *testing.T) {
	b := testBackend(t)
	ws := workspace(t)
	ctx := context.Background()
	start := time.Now()
	sb, err := b.Create(ctx, sandbox.Spec{ID: newID(t), Policy: testPolicy(t, ws, nil)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("create %v", time.Since(start))
	defer sb.Destroy(ctx)
	st, out := sh(t, sb, "id; pwd; echo hi > x; cat x; ls -la /dev")
	t.Logf("%+v\n%s", st, out)
}
