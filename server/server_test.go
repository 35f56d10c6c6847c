package server

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/store"
)

func TestLifecycleWithFake(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	c := ts.local(t)
	ctx := context.Background()

	sb, err := c.Create(ctx, api.CreateSandboxRequest{Labels: map[string]string{"job": "a"}, Env: map[string]string{"GREETING": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if sb.State != "running" || sb.Backend != "fake" || sb.Profile != "default" {
		t.Fatalf("created %+v", sb)
	}
	other, err := c.Create(ctx, api.CreateSandboxRequest{Labels: map[string]string{"job": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.List(ctx, client.ListOptions{Labels: map[string]string{"job": "a"}})
	if err != nil || len(l) != 1 || l[0].ID != sb.ID {
		t.Fatalf("list by label: %v %+v", err, l)
	}

	// Buffered exec, with the sandbox env.
	res, err := c.Run(ctx, sb.ID, "printenv", "GREETING")
	if err != nil || string(res.Stdout) != "hi\n" || res.Code != 0 {
		t.Fatalf("run: %v %+v", err, res)
	}
	res, err = c.Run(ctx, sb.ID, "exit", "3")
	if err != nil || res.Code != 3 {
		t.Fatalf("exit 3: %v %+v", err, res)
	}
	// Binary-safe buffered output.
	res, err = c.Run(ctx, sb.ID, "blob", "1000")
	if err != nil || len(res.Stdout) != 1000 || res.Stdout[255] != 255 {
		t.Fatalf("blob: %v %d", err, len(res.Stdout))
	}
	// Missing command: 404 kind, nothing to wait for.
	if _, err := c.Run(ctx, sb.ID, "no-such-command"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("missing command: %v", err)
	}

	// Streamed exec.
	var out, errb bytes.Buffer
	ex, err := c.Exec(ctx, sb.ID, client.ExecOptions{Args: []string{"ticker", "5"}, Stdout: &out, Stderr: &errb})
	if err != nil || ex.Code != 0 || strings.Count(out.String(), "tick") != 5 {
		t.Fatalf("stream: %v %+v %q", err, ex, out.String())
	}
	out.Reset()
	ex, err = c.Exec(ctx, sb.ID, client.ExecOptions{Args: []string{"err", "oops"}, Stdout: &out, Stderr: &errb})
	if err != nil || errb.String() != "oops\n" || out.Len() != 0 {
		t.Fatalf("stderr stream: %v %q %q", err, out.String(), errb.String())
	}
	// Streamed stdin.
	out.Reset()
	ex, err = c.Exec(ctx, sb.ID, client.ExecOptions{Args: []string{"cat"}, Stdin: strings.NewReader("round trip\n"), Stdout: &out})
	if err != nil || ex.Code != 0 || out.String() != "round trip\n" {
		t.Fatalf("stdin: %v %+v %q", err, ex, out.String())
	}

	// Background process: start, list, follow, reconnect by offset, wait.
	p, err := c.Start(ctx, sb.ID, client.ExecOptions{Args: []string{"ticker", "20"}})
	if err != nil || !p.Running {
		t.Fatalf("start: %v %+v", err, p)
	}
	ps, err := c.Processes(ctx, sb.ID)
	if err != nil || len(ps) != 1 || ps[0].ID != p.ID {
		t.Fatalf("processes: %v %+v", err, ps)
	}
	out.Reset()
	ex, err = c.Output(ctx, sb.ID, p.ID, client.OutputOptions{Follow: true, Stdout: &out})
	if err != nil || ex.Code != 0 || strings.Count(out.String(), "tick") != 20 {
		t.Fatalf("follow: %v %+v %q", err, ex, out.String())
	}
	var tail bytes.Buffer
	if _, err := c.Output(ctx, sb.ID, p.ID, client.OutputOptions{Offset: int64(out.Len() - 8), Stdout: &tail}); err != nil || tail.String() != "tick 19\n" {
		t.Fatalf("reconnect at offset: %v %q", err, tail.String())
	}
	if ex, err := c.Wait(ctx, sb.ID, p.ID); err != nil || ex.Code != 0 {
		t.Fatalf("wait: %v %+v", err, ex)
	}
	// Signal a long one.
	p, err = c.Start(ctx, sb.ID, client.ExecOptions{Args: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Signal(ctx, sb.ID, p.ID, sandbox.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if ex, err := c.Wait(ctx, sb.ID, p.ID); err != nil || ex.Code != 128+sandbox.SIGTERM {
		t.Fatalf("wait after TERM: %v %+v", err, ex)
	}
	if err := c.Kill(ctx, sb.ID, p.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Process(ctx, sb.ID, p.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("killed process still listed: %v", err)
	}

	// Files.
	data := bytes.Repeat([]byte{0, 1, 2, 255}, 1<<16)
	if err := c.WriteFile(ctx, sb.ID, "/work/deep/dir/f.bin", bytes.NewReader(data), 0o600); err != nil {
		t.Fatal(err)
	}
	rc, err := c.ReadFile(ctx, sb.ID, "/work/deep/dir/f.bin")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, want %d", len(got), len(data))
	}
	fi, err := c.Stat(ctx, sb.ID, "/work/deep/dir/f.bin")
	if err != nil || fi.Size != int64(len(data)) || fi.Mode.Perm() != 0o600 {
		t.Fatalf("stat: %v %+v", err, fi)
	}
	if err := c.Rename(ctx, sb.ID, "/work/deep/dir/f.bin", "/work/g.bin"); err != nil {
		t.Fatal(err)
	}
	if err := c.Mkdir(ctx, sb.ID, "/work/empty", 0o755, false); err != nil {
		t.Fatal(err)
	}
	ls, err := c.ListDir(ctx, sb.ID, "/work")
	if err != nil || len(ls) != 3 {
		t.Fatalf("list: %v %+v", err, ls)
	}
	// Archive round trip.
	tr, err := c.Download(ctx, sb.ID, "/work")
	if err != nil {
		t.Fatal(err)
	}
	archive, _ := io.ReadAll(tr)
	tr.Close()
	if err := c.Upload(ctx, other.ID, "/copy", bytes.NewReader(archive)); err != nil {
		t.Fatal(err)
	}
	rc, err = c.ReadFile(ctx, other.ID, "/copy/work/g.bin")
	if err != nil {
		t.Fatal(err)
	}
	got, _ = io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, data) {
		t.Fatal("archive round trip changed the file")
	}
	if err := c.Remove(ctx, sb.ID, "/work", false); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("non-recursive remove of a full dir: %v", err)
	}
	if err := c.Remove(ctx, sb.ID, "/work", true); err != nil {
		t.Fatal(err)
	}

	// PTY with resize.
	pty, err := c.PTY(ctx, sb.ID, client.PTYOptions{Args: []string{"winsize", "wait"}, Rows: 30, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, len("30 100\n"))
	if _, err := io.ReadFull(pty, first); err != nil || string(first) != "30 100\n" {
		t.Fatalf("pty size: %v %q", err, first)
	}
	if err := pty.Resize(ctx, 40, 120); err != nil {
		t.Fatal(err)
	}
	if _, err := pty.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	term, _ := io.ReadAll(pty)
	if ex, err := pty.Wait(ctx); err != nil || ex.Code != 0 || string(term) != "40 120\n" {
		t.Fatalf("pty after resize: %v %+v %q", err, ex, term)
	}
	pty.Close()

	// Events: created, execs, files.
	evs, err := c.Events(ctx, sb.ID, 0)
	if err != nil || len(evs) < 5 || evs[0].Type != "start" {
		t.Fatalf("events: %v %d %+v", err, len(evs), evs)
	}

	// Delete: gone from the backend, stopped in the store, 410/404 after.
	if err := c.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	g, err := c.Get(ctx, sb.ID)
	if err != nil || g.State != "stopped" || g.Reason != "deleted through the API" {
		t.Fatalf("after delete: %v %+v", err, g)
	}
	if _, err := c.Run(ctx, sb.ID, "true"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("exec after delete: %v", err)
	}
	for _, id := range ts.fake.Live() {
		if id == sb.ID {
			t.Fatal("deleted sandbox still live in the backend")
		}
	}
	if err := c.Delete(ctx, sb.ID); err != nil {
		t.Fatalf("second delete: %v", err)
	}
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	a, b := ts.tenant(t, "alice"), ts.tenant(t, "bob")
	ctx := context.Background()
	sb, err := a.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	notFound := func(what string, err error) {
		t.Helper()
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Status != 404 {
			t.Fatalf("%s as another tenant: want 404, got %v", what, err)
		}
	}
	_, err = b.Get(ctx, sb.ID)
	notFound("get", err)
	_, err = b.Run(ctx, sb.ID, "true")
	notFound("exec", err)
	_, err = b.ReadFile(ctx, sb.ID, "/etc/hostname")
	notFound("read", err)
	notFound("write", b.WriteFile(ctx, sb.ID, "/x", strings.NewReader("x"), 0))
	notFound("delete", b.Delete(ctx, sb.ID))
	_, err = b.SetKeepAlive(ctx, sb.ID, true)
	notFound("patch", err)
	_, err = b.Events(ctx, sb.ID, 0)
	notFound("events", err)
	_, err = b.Processes(ctx, sb.ID)
	notFound("processes", err)
	_, err = b.PTY(ctx, sb.ID, client.PTYOptions{Args: []string{"true"}})
	notFound("pty", err)
	if l, err := b.List(ctx, client.ListOptions{All: true}); err != nil || len(l) != 0 {
		t.Fatalf("bob lists %v %+v", err, l)
	}
	// The unix socket's local tenant is a tenant like any other.
	_, err = ts.local(t).Get(ctx, sb.ID)
	notFound("get from the local socket", err)
	// Still alive for alice.
	if _, err := a.Run(ctx, sb.ID, "true"); err != nil {
		t.Fatal(err)
	}
	// TCP without a key, or with a wrong one: 401; health without details.
	anon, _ := client.New(ts.tcp)
	if h, err := anon.Health(ctx); err != nil || h.Status != "ok" || len(h.Backends) != 0 {
		t.Fatalf("anonymous health over TCP: %v %+v", err, h)
	}
	// Host details are the operator's: not for a key either (issue 11).
	if h, err := a.Health(ctx); err != nil || len(h.Backends) != 0 {
		t.Fatalf("health with a key: %v %+v", err, h)
	}
	if h, err := ts.local(t).Health(ctx); err != nil || len(h.Backends) != 1 {
		t.Fatalf("health on the socket: %v %+v", err, h)
	}
	var ce *client.Error
	if _, err := anon.List(ctx, client.ListOptions{}); !errors.As(err, &ce) || ce.Status != 401 {
		t.Fatalf("no key over TCP: %v", err)
	}
	wrong, _ := client.New(ts.tcp, client.WithAPIKey(store.KeyPrefix+"nope"))
	if _, err := wrong.List(ctx, client.ListOptions{}); !errors.As(err, &ce) || ce.Status != 401 {
		t.Fatalf("wrong key: %v", err)
	}
}

func TestRevokedKey(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	ctx := context.Background()
	key := store.KeyPrefix + "revoke-me-0123456789"
	id, err := ts.store.AddKey(ctx, "carol", "", key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := client.New(ts.tcp, client.WithAPIKey(key))
	if _, err := c.List(ctx, client.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := ts.store.RevokeKey(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(ctx, client.ListOptions{}); !errors.Is(err, sandbox.ErrPermission) {
		t.Fatalf("revoked key still works: %v", err)
	}
}

func TestQuota(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *Config) { c.DefaultQuota = store.Quota{MaxSandboxes: 2} })
	ctx := context.Background()
	a := ts.tenant(t, "alice")
	b := ts.tenant(t, "bob")
	var ids []string
	for range 2 {
		sb, err := a.Create(ctx, api.CreateSandboxRequest{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
	}
	_, err := a.Create(ctx, api.CreateSandboxRequest{})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 429 || ce.Code != "limit_exceeded" {
		t.Fatalf("third sandbox: want 429, got %v", err)
	}
	if n := len(ts.fake.Live()); n != 2 {
		t.Fatalf("%d live sandboxes after a refused create, want 2", n)
	}
	// Another tenant has its own quota.
	if _, err := b.Create(ctx, api.CreateSandboxRequest{}); err != nil {
		t.Fatal(err)
	}
	// Freed by delete.
	if err := a.Delete(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Create(ctx, api.CreateSandboxRequest{}); err != nil {
		t.Fatalf("after delete: %v", err)
	}
	// Memory quota: the default profile asks 2 GiB per sandbox.
	if err := ts.store.SetQuota(ctx, "bob", store.Quota{MaxSandboxes: 10, MaxMemory: 3 << 30}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, api.CreateSandboxRequest{}); !errors.Is(err, sandbox.ErrLimit) {
		t.Fatalf("memory quota: %v", err)
	}
	if _, err := b.Create(ctx, api.CreateSandboxRequest{Policy: []byte(`{"limits":{"memory":"512Mi"}}`)}); err != nil {
		t.Fatalf("small sandbox within the memory quota: %v", err)
	}
}

func TestExpiryAndKeepAlive(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	c := ts.local(t)
	ctx := context.Background()
	short, err := c.Create(ctx, api.CreateSandboxRequest{Timeout: api.Duration(100e6)})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := c.Create(ctx, api.CreateSandboxRequest{Timeout: api.Duration(100e6), KeepAlive: true})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "expiry", func() bool {
		g, err := c.Get(ctx, short.ID)
		return err == nil && g.State == "stopped"
	})
	g, _ := c.Get(ctx, short.ID)
	if g.Reason != "expired" {
		t.Fatalf("reason %q", g.Reason)
	}
	if _, err := c.Run(ctx, short.ID, "true"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("exec in expired: %v", err)
	}
	// The kept one outlived the same timeout; turn keep-alive off with a
	// fresh short timeout and it goes too.
	if g, err := c.Get(ctx, kept.ID); err != nil || g.State != "running" {
		t.Fatalf("kept: %v %+v", err, g)
	}
	if _, err := c.SetKeepAlive(ctx, kept.ID, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "expiry after keep-alive off", func() bool {
		g, err := c.Get(ctx, kept.ID)
		return err == nil && g.State == "stopped"
	})
}

func TestIdleReaping(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *Config) { c.IdleTimeout = 200e6 })
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// A running background process keeps it from being idle.
	p, err := c.Start(ctx, sb.ID, client.ExecOptions{Args: []string{"sleep", "0.6"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(ctx, sb.ID, p.ID); err != nil {
		t.Fatalf("idle reaper killed a sandbox with a running process: %v", err)
	}
	eventually(t, "idle reaping", func() bool {
		g, err := c.Get(ctx, sb.ID)
		return err == nil && g.State == "stopped" && g.Reason == "idle"
	})
}

func TestSandboxDiedIsMarkedStopped(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ts.fake.Kill(sb.ID)
	eventually(t, "dead sandbox marked stopped", func() bool {
		g, err := c.Get(ctx, sb.ID)
		return err == nil && g.State == "stopped" && g.Reason == "sandbox ended"
	})
}

func TestArchiveRefusesLinksAndTraversal(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(hdrs ...*tar.Header) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, h := range hdrs {
			tw.WriteHeader(h)
			if h.Size > 0 {
				tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
			}
		}
		tw.Close()
		return b.Bytes()
	}
	ok := &tar.Header{Name: "ok.txt", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}
	cases := map[string][]byte{
		"dotdot":   mk(ok, &tar.Header{Name: "../escape", Typeflag: tar.TypeReg, Size: 1}),
		"absolute": mk(ok, &tar.Header{Name: "/etc/evil", Typeflag: tar.TypeReg, Size: 1}),
		"symlink":  mk(ok, &tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/etc"}),
		"hardlink": mk(ok, &tar.Header{Name: "hl", Typeflag: tar.TypeLink, Linkname: "/etc/shadow"}),
		"device":   mk(ok, &tar.Header{Name: "dev", Typeflag: tar.TypeChar}),
		"not tar":  []byte("this is not a tar archive at all, but long enough to look at...................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................."),
	}
	for name, archive := range cases {
		err := c.Upload(ctx, sb.ID, "/dst", bytes.NewReader(archive))
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Status != 400 {
			t.Errorf("%s: want 400, got %v", name, err)
		}
		if _, err := c.Stat(ctx, sb.ID, "/dst"); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("%s: refused upload created /dst (%v)", name, err)
		}
	}
}

func TestNetworkChangeIsAudited(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	c := ts.local(t)
	ctx := context.Background()
	// Created without network: it has no egress path to open later.
	closed, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetNetwork(ctx, closed.ID, api.NetworkRequest{Mode: "open"}); !errors.Is(err, sandbox.ErrNotSupported) {
		t.Fatalf("opening a sandbox created without network: %v", err)
	}
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Policy: []byte(`{"network":{"mode":"allowlist"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.Run(ctx, sb.ID, "printenv", "HTTPS_PROXY"); err != nil || r.Code != 0 || !strings.Contains(string(r.Stdout), "127.0.0.1") {
		t.Fatalf("HTTPS_PROXY with an allowlist: %v %+v", err, r)
	}
	if err := c.SetNetwork(ctx, sb.ID, api.NetworkRequest{Mode: "allowlist", Allow: []string{"example.com:443"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetNetwork(ctx, sb.ID, api.NetworkRequest{Mode: "none"}); err != nil {
		t.Fatal(err)
	}

	if err := c.SetNetwork(ctx, sb.ID, api.NetworkRequest{Mode: "allowlist", Allow: []string{"not a host!"}}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("bad rule: %v", err)
	}
	evs, err := c.Events(ctx, sb.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Type == "policy" {
			n++
		}
	}
	if n < 2 {
		t.Fatalf("%d policy events after two network changes: %+v", n, evs)
	}
}

func TestEventsFollowUntilDestroyed(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan api.Event, 100)
	done := make(chan error, 1)
	go func() {
		done <- c.FollowEvents(ctx, sb.ID, 0, func(e api.Event) error { got <- e; return nil })
	}()
	if _, err := c.Run(ctx, sb.ID, "true"); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("follow ended with %v", err)
	}
	close(got)
	var types []string
	var last int64
	for e := range got {
		if e.Seq <= last {
			t.Fatalf("sequence not increasing: %d after %d", e.Seq, last)
		}
		last = e.Seq
		types = append(types, e.Type)
	}
	if strings.Join(types, ",") != "start,exec,destroy" {
		t.Fatalf("followed events %v", types)
	}
	// A follow that starts after the destroy gets every event too, even
	// those still on their way to the store.
	for i := 0; i < 20; i++ {
		sb, err := c.Create(ctx, api.CreateSandboxRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		var late []string
		if err := c.FollowEvents(ctx, sb.ID, 0, func(e api.Event) error { late = append(late, e.Type); return nil }); err != nil {
			t.Fatal(err)
		}
		if strings.Join(late, ",") != "start,destroy" {
			t.Fatalf("follow after destroy: %v", late)
		}
	}
	// SSE framing for the same events.
	resp, body := rawDoAccept(t, ts, "/v1/sandboxes/"+sb.ID+"/events", "text/event-stream")
	if resp.Header.Get("Content-Type") != "text/event-stream" || strings.Count(string(body), "event: event\ndata: {") != 3 {
		t.Fatalf("SSE: %s %q", resp.Header.Get("Content-Type"), body)
	}
}

func TestOutputBufferDropsOldest(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *Config) { c.ProcessBuffer = 1000; c.MaxUpload = 4096 })
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Start(ctx, sb.ID, client.ExecOptions{Args: []string{"blob", "5000"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(ctx, sb.ID, p.ID); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := c.Output(ctx, sb.ID, p.ID, client.OutputOptions{Follow: true, Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 1000)
	for i := range want {
		want[i] = byte(4000 + i)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("kept %d bytes, want the last 1000 of 5000", out.Len())
	}
	pi, err := c.Process(ctx, sb.ID, p.ID)
	if err != nil || pi.OutputBytes != 5000 {
		t.Fatalf("process info: %v %+v", err, pi)
	}
	// Uploads over MaxUpload: 413, nothing written.
	err = c.WriteFile(ctx, sb.ID, "/tmp/big", bytes.NewReader(make([]byte, 5000)), 0)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 413 {
		t.Fatalf("oversized upload: %v", err)
	}
	if _, err := c.Stat(ctx, sb.ID, "/tmp/big"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("oversized upload left a file: %v", err)
	}
}

func TestFinishedProcessesAreBounded(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for i := 0; i < maxFinishedProcs+10; i++ {
		p, err := c.Start(ctx, sb.ID, client.ExecOptions{Args: []string{"true"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Wait(ctx, sb.ID, p.ID); err != nil {
			t.Fatal(err)
		}
		last = p.ID
	}
	ps, err := c.Processes(ctx, sb.ID)
	if err != nil || len(ps) > maxFinishedProcs || ps[len(ps)-1].ID != last {
		t.Fatalf("%d processes kept (%v), want at most %d ending with %s", len(ps), err, maxFinishedProcs, last)
	}
}

func TestExecSSE(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", ts.socket)
	}}}
	req, _ := http.NewRequest("POST", "http://airlock/v1/sandboxes/"+sb.ID+"/exec", strings.NewReader(`{"args":["echo","hi"],"encoding":"text"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := "event: stdout\ndata: {\"type\":\"stdout\",\"text\":\"hi\\n\",\"offset\":0}\n\n" +
		"event: exit\ndata: {\"type\":\"exit\",\"offset\":3,\"exit\":{\"exit_code\":0}}\n\n"
	if resp.Header.Get("Content-Type") != "text/event-stream" || string(body) != want {
		t.Fatalf("SSE exec: %s\n%q\nwant\n%q", resp.Header.Get("Content-Type"), body, want)
	}
}
