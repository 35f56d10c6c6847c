package gvisor

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

func TestCreateExecFilesDestroy(t *testing.T) {
	b := testBackend(t)
	ws := workspace(t)
	if err := os.WriteFile(filepath.Join(ws, "in.txt"), []byte("from host"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := newID(t)
	sb := create(t, b, sandbox.Spec{ID: id, Policy: testPolicy(t, ws, nil)})
	if st, out := sh(t, sb, "cat in.txt; echo; pwd; cat /proc/version"); st.Code != 0 || !strings.Contains(out, "from host") || !strings.Contains(out, ws) {
		t.Fatalf("status %+v output %q", st, out)
	} else {
		t.Logf("inside: %s", out)
	}
	ctx := context.Background()
	if err := sb.Files().WriteFile(ctx, ws+"/out.txt", strings.NewReader("from api"), 0o644, false); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "out.txt")); err != nil || string(b) != "from api" {
		t.Fatalf("host sees %q, %v", b, err)
	}
	r, err := sb.Files().ReadFile(ctx, ws+"/in.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r)
	r.Close()
	if string(got) != "from host" {
		t.Fatalf("ReadFile = %q", got)
	}
	if st, err := sb.Stats(ctx); err != nil || st.MemoryBytes <= 0 {
		t.Errorf("Stats = %+v, %v", st, err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{"/bin/true"}}); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("exec after destroy: %v", err)
	}
	if err := leaks(b, id); err != nil {
		t.Fatalf("leftovers after Destroy: %v", err)
	}
}

func TestExecNotFound(t *testing.T) {
	b := testBackend(t)
	sb := create(t, b, sandbox.Spec{Policy: testPolicy(t, workspace(t), nil)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	_, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{"/no/such/cmd"}, Stdout: &out})
	if !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("exec of a missing command: %v, want ErrNotFound", err)
	}
}
