package server

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

// A PTY session ends when its input does (CloseWrite: the process reads
// end of file) and when its context does (the process group is killed).
func TestPTYEndOfInputAndCancel(t *testing.T) {
	ts := newTestServer(t, nil)
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.PTY(ctx, sb.ID, client.PTYOptions{Args: []string{"cat"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if err := p.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(p)
	ex, err := p.Wait(ctx)
	if err != nil || ex.Code != 0 || string(out) != "hello\n" {
		t.Fatalf("cat after end of input: %+v %v, output %q", ex, err, out)
	}
	p.Close()

	cctx, cancel := context.WithCancel(ctx)
	p, err = c.PTY(cctx, sb.ID, client.PTYOptions{Args: []string{"sleep", "100"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	kills := ts.fake.Kills.Load()
	eventually(t, "the sleep to start", func() bool { return ts.fake.Processes() > 0 })
	cancel()
	go io.Copy(io.Discard, p)
	wctx, wcancel := context.WithTimeout(ctx, time.Minute) // a hang guard, not a timing
	defer wcancel()
	if _, err := p.Wait(wctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after the session's context ended: %v", err)
	}
	eventually(t, "the server to kill the process group", func() bool { return ts.fake.Kills.Load() > kills })
}
