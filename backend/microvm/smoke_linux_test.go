package microvm

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

func TestSmokeBootExec(t *testing.T) {
	b := testBackend(t, false)
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("from host"), 0o644)
	sp := sandbox.Spec{ID: "smoke-" + randID(), Policy: testPolicy(t, ws, false)}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t0 := time.Now()
	s, err := b.Create(ctx, sp)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy(ctx)
	t.Logf("create: %v", time.Since(t0))
	var out, errb bytes.Buffer
	p, err := s.Exec(ctx, sandbox.ExecRequest{Args: []string{"sh", "-c", "cat hello.txt; echo; id; uname -r; ls /; echo x > new.txt"}, Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait(ctx)
	t.Logf("status %+v err %v out %q err %q", st, err, out.String(), errb.String())
	if !strings.Contains(out.String(), "from host") {
		t.Fatal("no workspace")
	}
	_ = policy.NetworkNone
}
