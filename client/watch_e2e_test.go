package client_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

// nextUntil reads events of w until one matches want (returned: the
// events read); it fails the test when the watch ends first.
func nextUntil(t *testing.T, w *client.FileWatch, want api.FileEvent) []api.FileEvent {
	t.Helper()
	var seen []api.FileEvent
	for {
		e, err := w.Next()
		if err != nil {
			t.Fatalf("watch ended before %+v: %v; saw %+v", want, err, seen)
		}
		seen = append(seen, e)
		if e == want {
			return seen
		}
	}
}

// TestE2EWatchFiles: a watch sees what an exec writes, renames and
// removes (in new subdirectories too with recursive), over NDJSON, SSE and
// the CLI, and ends with the sandbox.
func TestE2EWatchFiles(t *testing.T) {
	s := requireNative(t)
	c := s.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Delete(ctx, sb.ID)
	run := func(script string) {
		t.Helper()
		r, err := c.Run(ctx, sb.ID, "sh", "-c", script)
		if err != nil || r.Code != 0 {
			t.Fatalf("%s: %v %+v", script, err, r)
		}
	}
	run("mkdir /tmp/w")
	if _, err := c.WatchFiles(ctx, sb.ID, "/tmp/nowhere", false); !errors.Is(err, api.KindOf(api.CodeNotFound)) {
		t.Fatalf("watching a missing path: %v", err)
	}
	w, err := c.WatchFiles(ctx, sb.ID, "/tmp/w", true)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	run("echo hi > /tmp/w/a; mkdir /tmp/w/d")
	seen := nextUntil(t, w, api.FileEvent{Op: "create", Path: "/tmp/w/d", Dir: true})
	if len(seen) < 3 || seen[0] != (api.FileEvent{Op: "create", Path: "/tmp/w/a"}) || seen[1] != (api.FileEvent{Op: "write", Path: "/tmp/w/a"}) {
		t.Fatalf("events of the first exec: %+v", seen)
	}
	run("echo x > /tmp/w/d/b; mv /tmp/w/a /tmp/w/c; rm /tmp/w/c")
	nextUntil(t, w, api.FileEvent{Op: "write", Path: "/tmp/w/d/b"})
	nextUntil(t, w, api.FileEvent{Op: "rename", Path: "/tmp/w/c", From: "/tmp/w/a"})
	nextUntil(t, w, api.FileEvent{Op: "remove", Path: "/tmp/w/c"})

	t.Run("sse", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://airlock/v1/sandboxes/"+sb.ID+"/files/watch?path=/tmp/w", nil)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := c.HTTPClient().Do(req)
		if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%v %+v", err, resp)
		}
		defer resp.Body.Close()
		run("touch /tmp/w/sse")
		br := bufio.NewReader(resp.Body)
		ev, _ := br.ReadString('\n')
		data, _ := br.ReadString('\n')
		if ev != "event: file\n" || data != `data: {"op":"create","path":"/tmp/w/sse"}`+"\n" {
			t.Fatalf("SSE: %q %q", ev, data)
		}
	})
	t.Run("cli", func(t *testing.T) {
		cmd := exec.Command(airlockBin, "sandbox", "watch", sb.ID, "/tmp/w")
		cmd.Env = append(os.Environ(), client.EnvHost+"=unix://"+s.socket)
		out, _ := cmd.StdoutPipe()
		errp, _ := cmd.StderrPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
		if line, _ := bufio.NewReader(errp).ReadString('\n'); !strings.HasPrefix(line, "watching ") {
			t.Fatalf("watch said %q", line)
		}
		run("mv /tmp/w/sse /tmp/w/cli")
		if line, _ := bufio.NewReader(out).ReadString('\n'); line != "rename /tmp/w/sse -> /tmp/w/cli\n" {
			t.Fatalf("CLI printed %q", line)
		}
	})
	t.Run("clients that leave free their watches", func(t *testing.T) {
		// 15 more than w; the sandbox allows 16 at once.
		open := func() ([]*client.FileWatch, error) {
			var ws []*client.FileWatch
			for i := 0; i < 15; i++ {
				x, err := c.WatchFiles(ctx, sb.ID, "/tmp/w", false)
				if err != nil {
					for _, y := range ws {
						y.Close()
					}
					return nil, err
				}
				ws = append(ws, x)
			}
			return ws, nil
		}
		var ws []*client.FileWatch
		// The subtests' watches may still be ending.
		eventually(t, "15 watches", func() bool {
			var err error
			ws, err = open()
			return err == nil
		})
		if _, err := c.WatchFiles(ctx, sb.ID, "/tmp/w", false); !errors.Is(err, api.KindOf(api.CodeLimitExceeded)) {
			t.Fatalf("a 17th watch: %v", err)
		}
		for _, x := range ws {
			x.Close()
		}
		eventually(t, "the watches are freed", func() bool {
			ws, err := open()
			for _, x := range ws {
				x.Close()
			}
			return err == nil
		})
	})
	// The watch ends with the sandbox.
	if err := c.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := w.Next(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("after the sandbox ended: %v", err)
			}
			break
		}
	}
}

// TestE2EWatchOverflow: a client that does not read makes the guest drop
// events, and an overflow event says so; the watch goes on.
func TestE2EWatchOverflow(t *testing.T) {
	c := requireNative(t).client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Delete(ctx, sb.ID)
	if r, err := c.Run(ctx, sb.ID, "mkdir", "/tmp/o"); err != nil || r.Code != 0 {
		t.Fatal(err, r)
	}
	w, err := c.WatchFiles(ctx, sb.ID, "/tmp/o", false)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// Far more events than the stream window, the sockets and the guest's
	// queue hold, while nobody reads; few enough that the stall stays well
	// inside the server's write timeout (30 s: a client silent longer is
	// cut off, not given an overflow), even on a loaded machine.
	if r, err := c.Run(ctx, sb.ID, "sh", "-c", "cd /tmp/o && seq 30000 | xargs touch"); err != nil || r.Code != 0 {
		t.Fatal(err, r)
	}
	// Now read; a marker written while the queue still drains may be
	// dropped too, so write markers until one is seen.
	type result struct {
		n        int
		overflow bool
		err      error
	}
	done := make(chan result, 1)
	go func() {
		var res result
		for {
			e, err := w.Next()
			if err != nil {
				res.err = err
				done <- res
				return
			}
			res.n++
			res.overflow = res.overflow || e.Op == "overflow"
			if strings.HasPrefix(e.Path, "/tmp/o/mark") {
				done <- res
				return
			}
		}
	}()
	var res result
	for i := 0; ; i++ {
		if r, err := c.Run(ctx, sb.ID, "touch", "/tmp/o/mark"+strconv.Itoa(i)); err != nil || r.Code != 0 {
			t.Fatal(err, r)
		}
		select {
		case res = <-done:
		case <-time.After(100 * time.Millisecond):
			continue
		}
		break
	}
	if res.err != nil || !res.overflow || res.n >= 30000 {
		t.Fatalf("%d events, overflow=%v, %v: nothing was dropped", res.n, res.overflow, res.err)
	}
}
