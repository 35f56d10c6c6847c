package client_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/sandbox/sandboxtest"
)

// TestE2EFullFlow: create -> streamed exec -> stdin -> background process
// -> 50 MB binary file round trip -> archive -> PTY -> events -> delete,
// against a real airlock serve with the native backend; then nothing of
// the sandbox is left on the host.
func TestE2EFullFlow(t *testing.T) {
	s := requireNative(t)
	c := s.client(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Backend: "native", Labels: map[string]string{"test": "e2e"}, Env: map[string]string{"FROM_API": "yes"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Delete(context.Background(), sb.ID) })

	// Streamed exec: stdout, stderr and the exit status apart.
	var out, errb bytes.Buffer
	ex, err := c.Exec(ctx, sb.ID, client.ExecOptions{Args: []string{"sh", "-c", `echo out $FROM_API; echo err >&2; exit 3`}, Stdout: &out, Stderr: &errb})
	if err != nil || ex.Code != 3 || out.String() != "out yes\n" || errb.String() != "err\n" {
		t.Fatalf("exec: %v %+v out=%q err=%q", err, ex, out.String(), errb.String())
	}
	// A missing command is an error of kind not-found, not an exit status.
	if _, err := c.Run(ctx, sb.ID, "/no/such/cmd"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("missing command: %v", err)
	}
	// Streamed stdin.
	in := bytes.Repeat([]byte("stdin line\n"), 10000)
	out.Reset()
	ex, err = c.Exec(ctx, sb.ID, client.ExecOptions{Args: []string{"cat"}, Stdin: bytes.NewReader(in), Stdout: &out})
	if err != nil || ex.Code != 0 || !bytes.Equal(out.Bytes(), in) {
		t.Fatalf("stdin: %v %+v got %d bytes", err, ex, out.Len())
	}

	// Background process: follow, reconnect from an offset, wait, signal.
	p, err := c.Start(ctx, sb.ID, client.ExecOptions{Args: []string{"sh", "-c", `for i in 1 2 3 4 5; do echo line $i; sleep 0.05; done`}})
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	ex, err = c.Output(ctx, sb.ID, p.ID, client.OutputOptions{Follow: true, Stdout: &out})
	if err != nil || ex.Code != 0 || out.String() != "line 1\nline 2\nline 3\nline 4\nline 5\n" {
		t.Fatalf("follow: %v %+v %q\n%s", err, ex, out.String(), shared.logText())
	}
	var tail bytes.Buffer
	if _, err := c.Output(ctx, sb.ID, p.ID, client.OutputOptions{Offset: int64(out.Len() - 7), Stdout: &tail}); err != nil || tail.String() != "line 5\n" {
		t.Fatalf("reconnect: %v %q", err, tail.String())
	}
	long, err := c.Start(ctx, sb.ID, client.ExecOptions{Args: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	ps, err := c.Processes(ctx, sb.ID)
	if err != nil || len(ps) != 2 {
		t.Fatalf("processes: %v %+v", err, ps)
	}
	if err := c.Signal(ctx, sb.ID, long.ID, sandbox.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if ex, err := c.Wait(ctx, sb.ID, long.ID); err != nil || ex.Code != 128+sandbox.SIGTERM || ex.Signal != sandbox.SIGTERM {
		t.Fatalf("TERM: %v %+v", err, ex)
	}

	// Files: 50 MB of random bytes, written, read back and hashed inside.
	big := make([]byte, 50<<20)
	rand.Read(big)
	sum := sha256.Sum256(big)
	path := sb.Workdir + "/data/big.bin"
	if err := c.WriteFile(ctx, sb.ID, path, bytes.NewReader(big), 0o640); err != nil {
		t.Fatal(err)
	}
	rc, err := c.ReadFile(ctx, sb.ID, path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := io.Copy(h, rc)
	rc.Close()
	if err != nil || n != int64(len(big)) || !bytes.Equal(h.Sum(nil), sum[:]) {
		t.Fatalf("read back: %v, %d bytes, hash differs=%v", err, n, !bytes.Equal(h.Sum(nil), sum[:]))
	}
	r, err := c.Run(ctx, sb.ID, "sha256sum", path)
	if err != nil || !strings.HasPrefix(string(r.Stdout), hex.EncodeToString(sum[:])) {
		t.Fatalf("hash inside: %v %+v", err, r)
	}
	fi, err := c.Stat(ctx, sb.ID, path)
	if err != nil || fi.Size != int64(len(big)) || fi.Mode.Perm() != 0o640 {
		t.Fatalf("stat: %v %+v", err, fi)
	}
	// Archive: download the directory, upload it elsewhere, compare.
	if err := c.WriteFile(ctx, sb.ID, sb.Workdir+"/data/sub/small.txt", strings.NewReader("small\n"), 0); err != nil {
		t.Fatal(err)
	}
	tr, err := c.Download(ctx, sb.ID, sb.Workdir+"/data")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Upload(ctx, sb.ID, "/tmp/restored", tr); err != nil {
		t.Fatal(err)
	}
	tr.Close()
	r, err = c.Run(ctx, sb.ID, "sh", "-c", "sha256sum < /tmp/restored/data/big.bin; cat /tmp/restored/data/sub/small.txt")
	if err != nil || string(r.Stdout) != hex.EncodeToString(sum[:])+"  -\nsmall\n" {
		t.Fatalf("archive round trip: %v %q", err, r.Stdout)
	}
	if err := c.Rename(ctx, sb.ID, path, sb.Workdir+"/moved.bin"); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(ctx, sb.ID, "/tmp/restored", true); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(ctx, sb.ID, sb.Workdir+"/data", true); err != nil {
		t.Fatal(err)
	}
	ls, err := c.ListDir(ctx, sb.ID, sb.Workdir)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]int64{}
	for _, f := range ls {
		names[f.Name] = f.Size
	}
	if _, ok := names["data"]; ok || names["moved.bin"] != int64(len(big)) {
		t.Fatalf("list workdir after rename and remove: %v", names)
	}

	// PTY: a terminal of the asked size, then resized.
	pty, err := c.PTY(ctx, sb.ID, client.PTYOptions{Args: []string{"sh", "-c", "stty size; read x; stty size"}, Rows: 30, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	var term bytes.Buffer
	done := make(chan error, 1)
	go func() { _, err := io.Copy(&syncWriter{w: &term}, pty); done <- err }()
	eventually(t, "first stty size", func() bool { return strings.Contains(syncString(&term), "30 100") })
	if err := pty.Resize(ctx, 40, 120); err != nil {
		t.Fatal(err)
	}
	if _, err := pty.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	<-done
	ex, err = pty.Wait(ctx)
	if err != nil || ex.Code != 0 || !strings.Contains(syncString(&term), "40 120") {
		t.Fatalf("pty: %v %+v %q", err, ex, syncString(&term))
	}
	pty.Close()

	// Events: the API's own (start, exec, file) are there.
	evs, err := c.Events(ctx, sb.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]int{}
	for _, e := range evs {
		types[e.Type]++
	}
	if types["start"] == 0 || types["exec"] < 5 || types["file"] < 3 {
		t.Fatalf("events by type: %v", types)
	}

	// Delete: stopped in the store, nothing left on the host.
	if err := c.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	g, err := c.Get(ctx, sb.ID)
	if err != nil || g.State != "stopped" {
		t.Fatalf("after delete: %v %+v", err, g)
	}
	if err := sandboxtest.HostLeaks(sb.ID, s.data); err != nil {
		t.Fatalf("leaks after delete: %v", err)
	}
}

type syncWriter struct {
	w *bytes.Buffer
}

var syncMu sync.Mutex

func (s *syncWriter) Write(p []byte) (int, error) {
	syncMu.Lock()
	defer syncMu.Unlock()
	return s.w.Write(p)
}

func syncString(b *bytes.Buffer) string {
	syncMu.Lock()
	defer syncMu.Unlock()
	return b.String()
}

// TestE2ETenantIsolation: over TCP with API keys, tenant B can neither see
// nor touch tenant A's sandbox (404, as for a sandbox that does not exist).
func TestE2ETenantIsolation(t *testing.T) {
	s := newServer(t, true)
	ctx := context.Background()
	a, err := client.New(s.tcpURL(), client.WithAPIKey(s.newKey(t, "alice")))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := client.New(s.tcpURL(), client.WithAPIKey(s.newKey(t, "bob")))
	anon, _ := client.New(s.tcpURL())
	sb, err := a.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.WriteFile(ctx, sb.ID, "/tmp/alice.txt", strings.NewReader("alice's secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	is404 := func(what string, err error) {
		t.Helper()
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Status != 404 {
			t.Errorf("bob %s alice's sandbox: want 404, got %v", what, err)
		}
	}
	_, err = b.Get(ctx, sb.ID)
	is404("gets", err)
	_, err = b.Run(ctx, sb.ID, "cat", "/tmp/alice.txt")
	is404("execs in", err)
	_, err = b.ReadFile(ctx, sb.ID, "/tmp/alice.txt")
	is404("reads from", err)
	is404("deletes", b.Delete(ctx, sb.ID))
	_, err = b.SetTimeout(ctx, sb.ID, time.Second)
	is404("shortens", err)
	_, err = b.PTY(ctx, sb.ID, client.PTYOptions{Args: []string{"sh"}})
	is404("opens a PTY in", err)
	if l, err := b.List(ctx, client.ListOptions{All: true}); err != nil || len(l) != 0 {
		t.Errorf("bob lists %v %+v", err, l)
	}
	if _, err := anon.List(ctx, client.ListOptions{}); !errors.Is(err, sandbox.ErrPermission) {
		t.Errorf("no key over TCP: %v", err)
	}
	rc, err := a.ReadFile(ctx, sb.ID, "/tmp/alice.txt")
	if err != nil {
		t.Fatalf("alice after bob's attempts: %v", err)
	}
	defer rc.Close()
	if b, _ := io.ReadAll(rc); string(b) != "alice's secret" {
		t.Fatalf("alice after bob's attempts: %q", b)
	}
}

// TestE2EExpiry: a sandbox past its timeout is destroyed and leaves nothing.
func TestE2EExpiry(t *testing.T) {
	c := shared.client(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Timeout: api.Duration(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, sb.ID, client.ExecOptions{Args: []string{"sleep", "600"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "expiry", func() bool {
		g, err := c.Get(ctx, sb.ID)
		return err == nil && g.State == "stopped" && g.Reason == "expired"
	})
	if _, err := c.Run(ctx, sb.ID, "true"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("exec in an expired sandbox: %v", err)
	}
	if native != nil {
		if err := sandboxtest.HostLeaks(sb.ID, native.data); err != nil {
			t.Fatalf("leaks after expiry: %v", err)
		}
	}
}

// TestE2EKill9: kill -9 the server during 20 concurrent execs; restart it:
// no process, mount or cgroup of those sandboxes is left, and the store
// says they are stopped.
func TestE2EKill9(t *testing.T) {
	requireNative(t)
	dir := t.TempDir()
	s, err := startServe(dir, "--backend", "native")
	if err != nil {
		t.Fatal(err)
	}
	c := s.client(t)
	ctx := context.Background()
	var ids []string
	for range 4 {
		sb, err := c.Create(ctx, api.CreateSandboxRequest{})
		if err != nil {
			s.stop()
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
	}
	started := make(chan struct{}, 20)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &firstWrite{ch: started}
			c.Exec(ctx, ids[i%len(ids)], client.ExecOptions{Args: []string{"sh", "-c", "echo started; exec sleep 600"}, Stdout: w})
		}()
	}
	for range 20 {
		select {
		case <-started:
		case <-time.After(60 * time.Second):
			s.kill9()
			t.Fatalf("execs did not start; log:\n%s", s.logText())
		}
	}
	s.kill9()
	wg.Wait() // every exec ended with the connection
	// Restart on the same data directory: reconcile.
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	c2 := s.client(t)
	for _, id := range ids {
		if err := sandboxtest.HostLeaks(id, s.data); err != nil {
			t.Errorf("after restart: %v", err)
		}
		g, err := c2.Get(ctx, id)
		if err != nil || g.State != "stopped" || g.Reason != "server restarted" {
			t.Errorf("store after restart: %v %+v", err, g)
		}
	}
	if l, err := c2.List(ctx, client.ListOptions{}); err != nil || len(l) != 0 {
		t.Errorf("running after restart: %v %+v", err, l)
	}
	// And the restarted server works.
	sb, err := c2.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c2.Run(ctx, sb.ID, "echo", "alive"); err != nil || string(r.Stdout) != "alive\n" {
		t.Fatalf("after restart: %v %+v", err, r)
	}
}

type firstWrite struct {
	once sync.Once
	ch   chan struct{}
}

func (f *firstWrite) Write(p []byte) (int, error) {
	f.once.Do(func() { f.ch <- struct{}{} })
	return len(p), nil
}

// TestE2EBadInput: bad requests get a 4xx JSON error and create nothing.
func TestE2EBadInput(t *testing.T) {
	c := requireNative(t).client(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Delete(ctx, sb.ID)
	before, err := c.List(ctx, client.ListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	// A host file the sandbox must not reach, and a symlink to it inside.
	hostDir := t.TempDir()
	secret := hostDir + "/host-secret"
	if err := writeFile(secret, "host secret"); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Run(ctx, sb.ID, "ln", "-s", secret, sb.Workdir+"/link-out"); err != nil || r.Code != 0 {
		t.Fatalf("ln: %v %+v", err, r)
	}
	if r, err := c.Run(ctx, sb.ID, "ln", "-s", "/", sb.Workdir+"/root-link"); err != nil || r.Code != 0 {
		t.Fatalf("ln: %v %+v", err, r)
	}
	if r, err := c.Run(ctx, sb.ID, "ln", "-s", "/etc", sb.Workdir+"/etc-link"); err != nil || r.Code != 0 {
		t.Fatalf("ln: %v %+v", err, r)
	}
	huge := make([]string, 5000)
	for i := range huge {
		huge[i] = "x"
	}
	cases := []struct {
		name string
		do   func() error
	}{
		{"malformed JSON", func() error { return rawPost(c, "/v1/sandboxes", `{"backend":`) }},
		{"unknown field", func() error { return rawPost(c, "/v1/sandboxes", `{"backend":"native","nope":1}`) }},
		{"oversized body", func() error {
			return rawPost(c, "/v1/sandboxes", `{"labels":{"a":"`+strings.Repeat("x", 2<<20)+`"}}`)
		}},
		{"unknown backend", func() error { _, err := c.Create(ctx, api.CreateSandboxRequest{Backend: "nope"}); return err }},
		{"huge argv", func() error { _, err := c.Run(ctx, sb.ID, huge...); return err }},
		{"traversal", func() error { _, err := c.ReadFile(ctx, sb.ID, "/tmp/../../etc/passwd"); return err }},
		{"absolute outside (host secret)", func() error { _, err := c.ReadFile(ctx, sb.ID, secret); return err }},
		{"write outside the writable tree", func() error {
			return c.WriteFile(ctx, sb.ID, "/etc/airlock-evil", strings.NewReader("x"), 0)
		}},
		{"symlink out (read)", func() error { _, err := c.ReadFile(ctx, sb.ID, sb.Workdir+"/link-out"); return err }},
		{"symlink out (write)", func() error {
			return c.WriteFile(ctx, sb.ID, sb.Workdir+"/etc-link/airlock-planted", strings.NewReader("x"), 0)
		}},
	}
	for _, tc := range cases {
		err := tc.do()
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Status < 400 || ce.Status > 499 || ce.Code == "" || ce.Message == "" {
			t.Errorf("%s: want a 4xx JSON error, got %v", tc.name, err)
		} else {
			t.Logf("%s: %d %s: %s", tc.name, ce.Status, ce.Code, ce.Message)
		}
	}
	after, err := c.List(ctx, client.ListOptions{All: true})
	if err != nil || len(after) != len(before) {
		t.Errorf("bad requests changed the sandbox list: %d -> %d (%v)", len(before), len(after), err)
	}
	if _, err := readHost("/etc/airlock-planted"); err == nil {
		t.Error("a write through a symlink landed in the host's /etc")
	}
	// A link to "/" resolves to the sandbox's own root: a write through it
	// to a host path lands (if anywhere) in the sandbox's private /tmp,
	// never on the host.
	c.WriteFile(ctx, sb.ID, sb.Workdir+"/root-link"+hostDir+"/planted", strings.NewReader("x"), 0)
	if _, err := readHost(hostDir + "/planted"); err == nil {
		t.Error("a write through a symlink to / landed on the host")
	}
}

func rawPost(c *client.Client, path, body string) error {
	return client.RawForTest(c, "POST", path, "application/json", strings.NewReader(body))
}

// TestE2EWarmPool: creates are served from the pool, never the same
// sandbox twice, and a sandbox one tenant used is never handed to another.
func TestE2EWarmPool(t *testing.T) {
	requireNative(t)
	s, err := startServe(t.TempDir(), "--backend", "native", "--pool", "native/default=2", "--listen", freePort(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	ctx := context.Background()
	a, _ := client.New(s.tcp, client.WithAPIKey(s.newKey(t, "alice")))
	b, _ := client.New(s.tcp, client.WithAPIKey(s.newKey(t, "bob")))
	eventually(t, "pool filled", func() bool { return poolReady(s) == 2 })
	sa, err := a.Create(ctx, api.CreateSandboxRequest{Env: map[string]string{"WHO": "alice"}})
	if err != nil || !sa.Pooled {
		t.Fatalf("alice's create: %v pooled=%v", err, sa != nil && sa.Pooled)
	}
	r, err := a.Run(ctx, sa.ID, "sh", "-c", `echo $WHO > /tmp/mark; echo $WHO > "$HOME/mark"; cat /tmp/mark`)
	if err != nil || string(r.Stdout) != "alice\n" {
		t.Fatalf("alice's run: %v %+v\n%s", err, r, s.logText())
	}
	if err := a.Delete(ctx, sa.ID); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{sa.ID: true}
	for i := 0; i < 4; i++ {
		eventually(t, "pool refilled", func() bool { return poolReady(s) == 2 })
		sb, err := b.Create(ctx, api.CreateSandboxRequest{})
		if err != nil || !sb.Pooled {
			t.Fatalf("bob's create %d: %v", i, err)
		}
		if seen[sb.ID] {
			t.Fatalf("sandbox %s handed out twice", sb.ID)
		}
		seen[sb.ID] = true
		r, err := b.Run(ctx, sb.ID, "sh", "-c", `cat /tmp/mark "$HOME/mark" 2>/dev/null; echo done`)
		if err != nil || string(r.Stdout) != "done\n" {
			t.Fatalf("bob's sandbox holds state: %v %q", err, r.Stdout)
		}
	}
}

// An exec past its timeout is killed and says so.
func TestE2EExecTimeout(t *testing.T) {
	c := shared.client(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Delete(ctx, sb.ID)
	r, err := c.RunRequest(ctx, sb.ID, api.ExecRequest{Args: []string{"sleep", "600"}, Timeout: api.Duration(300 * time.Millisecond)})
	if err != nil || !r.TimedOut || r.Code == 0 {
		t.Fatalf("timeout: %v %+v", err, r)
	}
}
