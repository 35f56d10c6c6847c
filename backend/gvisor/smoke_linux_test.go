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

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

func TestCreateExecFilesDestroy(t *testing.T) {
	b := testBackend(t)
	ws := workspace(t)
	if err := os.WriteFile(filepath.Join(ws, "in.txt"), []byte("from host"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := newID(t)
	sb := create(t, b, sandbox.Spec{ID: id, Policy: testPolicy(t, ws, direct)})
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

func TestInjectedFilesReadOnly(t *testing.T) {
	b := testBackend(t)
	ws := workspace(t)
	sb := create(t, b, sandbox.Spec{Policy: testPolicy(t, ws, nil), Files: []sandbox.File{
		{Path: "/run/airlock/ca.pem", Data: []byte("PEM-DATA"), Mode: 0o644},
		{Path: "/etc/hostname", Data: []byte("conf")}, // over an existing file in a host dir
		{Path: "/tmp/x/injected.conf", Data: []byte("tmp")},
	}})
	if st, out := sh(t, sb, "cat /run/airlock/ca.pem; echo; cat /etc/hostname; echo; cat /tmp/x/injected.conf"); st.Code != 0 || out != "PEM-DATA\nconf\ntmp" {
		t.Fatalf("injected files: %+v %q", st, out)
	}
	for _, attack := range []string{"echo x > /run/airlock/ca.pem", "rm /run/airlock/ca.pem", "chmod 666 /run/airlock/ca.pem", "echo x >> /etc/hostname"} {
		if st, out := sh(t, sb, attack); st.Code == 0 {
			t.Errorf("%q succeeded: %q", attack, out)
		}
	}
	// A file that would have to be created inside a host directory is
	// refused: gVisor would create its mount point on the host.
	_, err := b.Create(context.Background(), sandbox.Spec{ID: newID(t), Policy: testPolicy(t, ws, nil),
		Files: []sandbox.File{{Path: "/etc/airlock-injected.conf", Data: []byte("x")}}})
	if !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("file in a host directory: %v, want ErrInvalid", err)
	}
	if _, err := os.Stat("/etc/airlock-injected.conf"); err == nil {
		os.Remove("/etc/airlock-injected.conf")
		t.Error("injected file appeared on the host")
	}
}

func TestSandboxTimeout(t *testing.T) {
	b := testBackend(t)
	pol := testPolicy(t, workspace(t), nil)
	pol.Limits.Timeout = policy.Duration(2 * time.Second)
	id := newID(t)
	sb := create(t, b, sandbox.Spec{ID: id, Policy: pol})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{"/bin/sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait(ctx)
	if err != nil || !st.TimedOut {
		t.Fatalf("Wait = %+v, %v; want TimedOut", st, err)
	}
	select {
	case <-sb.Done():
	case <-ctx.Done():
		t.Fatal("sandbox not ended by its wall timeout")
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{"/bin/true"}}); !errors.Is(err, sandbox.ErrTimeout) {
		t.Errorf("exec after the timeout: %v, want ErrTimeout", err)
	}
	if err := leaks(b, id); err != nil {
		t.Error(err)
	}
}
