package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/sandbox/sandboxfake"
	"github.com/airlock-dev/airlock/server/store"
)

func TestKeyForLocalTenantRefused(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	if _, err := ts.store.AddKey(context.Background(), store.LocalTenant, "x", store.KeyPrefix+"abc"); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("key for tenant local: %v, want ErrInvalid", err)
	}
}

// TestRevokedKeyEndsStream: an event stream opened with a key ends soon
// after the key is revoked (by another process: the store is the only
// channel).
func TestRevokedKeyEndsStream(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	key := store.KeyPrefix + "revoke-" + newID("")
	id, err := ts.store.AddKey(context.Background(), "acme", "t", key)
	if err != nil {
		t.Fatal(err)
	}
	c := ts.tenantKey(t, key)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// The stream is live once its first event (the create's) arrived:
	// that is the signal to revoke, not a pause.
	done, live := make(chan error, 1), make(chan struct{})
	var once sync.Once
	go func() {
		done <- c.FollowEvents(ctx, sb.ID, 0, func(api.Event) error { once.Do(func() { close(live) }); return nil })
	}()
	select {
	case <-live:
	case err := <-done:
		t.Fatalf("stream ended before the revocation: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the stream delivered no event")
	}
	if err := ts.store.RevokeKey(ctx, id); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream of a revoked key kept running")
	}
}

// TestConnectionLimits: connections beyond the per-network limit are
// answered 429 and closed at accept (before any request is read), and the unix socket,
// with its own budget, still answers.
func TestConnectionLimits(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.TCPLimits = ConnLimits{PerPrefix: 4, Total: 100} })
	addr := strings.TrimPrefix(ts.tcp, "http://")
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	closed := 0
	for i := 0; i < 20; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		// Headers only, never finished: a slowloris.
		fmt.Fprintf(c, "POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\n")
	}
	var errs []string
	for _, c := range held {
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		// The request head is never finished: any answer is the refusal
		// written at accept (429 JSON), before the close.
		_, err := c.Read(make([]byte, 1))
		if err == nil || err == io.EOF || errors.Is(err, syscall.ECONNRESET) {
			closed++
		}
		errs = append(errs, fmt.Sprint(err))
	}
	t.Logf("reads: %v", errs)
	if closed < 16 {
		t.Fatalf("%d of 20 connections from one address closed, want at least 16 (limit 4)", closed)
	}
	if _, err := ts.local(t).List(context.Background(), client.ListOptions{}); err != nil {
		t.Fatalf("unix socket during the flood: %v", err)
	}
}

// TestSlowBodyIsCut: a client that stops sending its body loses the
// connection after the I/O timeout, whoever it is.
func TestSlowBodyIsCut(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *Config) { c.IOTimeout = 300 * time.Millisecond })
	key := store.KeyPrefix + "slow-" + newID("")
	if _, err := ts.store.AddKey(context.Background(), "acme", "t", key); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", strings.TrimPrefix(ts.tcp, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", key)
	// The condition is the server's close (end of file or a reset); the
	// deadline is only a hang guard, far above the 300ms I/O timeout.
	c.SetReadDeadline(time.Now().Add(2 * time.Minute))
	b, err := io.ReadAll(c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection still open at the hang guard: %q", b)
	}
	if n := len(ts.fake.Live()); n != 0 {
		t.Fatalf("%d sandboxes from a body never sent", n)
	}
}

func TestStorageLowRefusesNewWork(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ts.srv.storage.free = func(string) (uint64, error) { return 1 << 20, nil }
	_, err = c.Create(ctx, api.CreateSandboxRequest{})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusInsufficientStorage || ce.Code != api.CodeInsufficientStorage {
		t.Fatalf("create with the disk low: %v, want 507 insufficient_storage", err)
	}
	if _, err := c.Run(ctx, sb.ID, "true"); !errors.As(err, &ce) || ce.Status != 507 {
		t.Fatalf("exec with the disk low: %v, want 507", err)
	}
	h, err := c.Health(ctx)
	if err != nil || h.Status != "degraded" || !strings.Contains(h.Storage, "free") {
		t.Fatalf("health with the disk low: %v %+v", err, h)
	}
	// What is not new work still works, and is audited.
	if err := c.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	ts.srv.events.flush()
	evs, _ := ts.store.Events(ctx, sb.ID, 0, 100)
	if len(evs) == 0 || evs[len(evs)-1].Type != audit.TypeDestroy {
		t.Fatalf("events after the refusal: %+v", evs)
	}
}

// TestEventsAggregatedBeyondRate: 20,000 violations in a burst store
// about rate events a second plus one aggregate per second; every one of
// them is counted in what is stored.
func TestEventsAggregatedBeyondRate(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *Config) { c.EventRate = 50 })
	clk := &stepClock{now: time.Unix(1_700_000_000, 0)}
	ts.srv.events.clock = clk
	sink := ts.srv.events.sink("sb-flood", "fake", 50)
	const n = 20000
	for i := 0; i < n; i++ {
		sink.Emit(audit.Event{Type: audit.TypeViolation, Message: "denied syscall mount", Fields: map[string]any{"syscall": "mount"}})
	}
	clk.step(time.Second) // the aggregate's second
	ts.srv.events.flush()
	evs, err := ts.store.Events(context.Background(), "sb-flood", 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, e := range evs {
		if a, ok := e.Fields["aggregated"].(float64); ok {
			total += int(a)
			if !strings.Contains(e.Message, "more like this") {
				t.Errorf("aggregate message %q", e.Message)
			}
		} else {
			total++
		}
	}
	if len(evs) > 200 || total != n {
		t.Fatalf("%d events stored for %d violations (counted %d): want few, counting all", len(evs), n, total)
	}
}

// TestEventsAggregatedWhateverTheMessage: a sandbox whose violations say
// something different each time (another path, another errno, and types
// no one expected) still adds a bounded number of rows each second, and
// every event is counted in them.
func TestEventsAggregatedWhateverTheMessage(t *testing.T) {
	t.Parallel()
	const rate = 50
	ts := newTestServer(t, func(c *Config) { c.EventRate = rate })
	clk := &stepClock{now: time.Unix(1_700_000_000, 0)}
	ts.srv.events.clock = clk
	sink := ts.srv.events.sink("sb-vary", "fake", rate)
	const seconds, perSecond = 5, 4000
	types := []string{audit.TypeViolation, audit.TypeDenied, audit.TypeEgress, audit.TypeFile}
	for i := range 40 {
		types = append(types, fmt.Sprintf("made-up-%d", i))
	}
	sent := 0
	for sec := range seconds {
		for i := range perSecond {
			typ := types[0]
			if i%5 == 0 {
				typ = types[i/5%len(types)]
			}
			sink.Emit(audit.Event{Type: typ, Message: fmt.Sprintf("denied open /tmp/%d-%d: errno %d", sec, i, i%133),
				Fields: map[string]any{"path": fmt.Sprintf("/tmp/%d-%d", sec, i)}})
			sent++
		}
		clk.step(time.Second) // this second's aggregates
	}
	ts.srv.events.flush()
	evs, err := ts.store.Events(context.Background(), "sb-vary", 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	total, summaries := 0, 0
	for _, e := range evs {
		a, ok := e.Fields["aggregated"].(float64)
		if !ok {
			total++
			continue
		}
		total += int(a)
		if _, ok := e.Fields["first_message"]; ok {
			summaries++
		}
	}
	// Per second: rate single events (one burst of rate more at the
	// start), heldKinds aggregates of one message, heldKinds summaries of
	// one type and one of the other types.
	bound := rate + seconds*(rate+2*heldKinds+1)
	if len(evs) > bound || total != sent || summaries == 0 {
		t.Fatalf("%d rows for %d distinct events (counted %d, %d summaries): want at most %d rows counting all",
			len(evs), sent, total, summaries, bound)
	}
	t.Logf("%d distinct events over %d s: %d rows (bound %d), %d of them summaries", sent, seconds, len(evs), bound, summaries)
}

// TestSparseArchiveCountedBySize: a tiny tar of a sparse 2 GiB file (GNU
// and PAX formats, as GNU tar writes them) is refused before anything is
// written; the limit counts what extraction would write.
func TestSparseArchiveCountedBySize(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *Config) { c.MaxExtract = 64 << 20 })
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := exec.Command("truncate", "-s", "2G", filepath.Join(dir, "big")).Run(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "small"), []byte("x"), 0o644)
	for _, format := range []string{"gnu", "pax"} {
		out := filepath.Join(t.TempDir(), "a.tar")
		if b, err := exec.Command("tar", "--sparse", "--format="+format, "-C", dir, "-cf", out, "small", "big").CombinedOutput(); err != nil {
			t.Fatalf("tar: %v %s", err, b)
		}
		fi, _ := os.Stat(out)
		if fi.Size() > 64<<10 {
			t.Fatalf("%s: the sparse tar is %d bytes, not small", format, fi.Size())
		}
		f, _ := os.Open(out)
		err := c.Upload(ctx, sb.ID, "/dst-"+format, f)
		f.Close()
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Status != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: sparse 2 GiB upload: %v, want 413", format, err)
		}
		if _, err := c.Stat(ctx, sb.ID, "/dst-"+format); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s: refused upload created its target (%v)", format, err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(ts.dir, "upload-*")); len(left) > 0 {
		t.Errorf("spool files left: %v", left)
	}
}

// TestDownloadOverLimitIsAnError: a tree with more entries than an
// archive may hold answers an error, never a 200 with a cut tar.
func TestDownloadOverLimitIsAnError(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// A chain deeper than the depth limit is the cheap way over a limit.
	p := "/deep"
	for i := 0; i <= maxArchiveDepth+1; i++ {
		p += "/d"
	}
	if err := c.Mkdir(ctx, sb.ID, p, 0o755, true); err != nil {
		t.Fatal(err)
	}
	resp, body := rawDo(t, ts, "GET", "/v1/sandboxes/"+sb.ID+"/archive?path=/deep", "", nil)
	if resp.StatusCode == http.StatusOK || !strings.Contains(string(body), "deeper than") {
		t.Fatalf("download over the depth limit: %s %.200s", resp.Status, body)
	}
}

// TestBackgroundProcessCapUnderLoad: 300 background execs at once never
// get more than the per-sandbox cap running.
func TestBackgroundProcessCapUnderLoad(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var started atomic.Int32
	for i := 0; i < 300; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Start(ctx, sb.ID, client.ExecOptions{Args: []string{"sleep", "30"}}); err == nil {
				started.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := started.Load(); n > maxProcsPerSandbox || n == 0 {
		t.Fatalf("%d background processes started, cap %d", n, maxProcsPerSandbox)
	}
}

// TestWasmMemoryBoundedInTotal: wasm sandboxes' memory is the server's
// own, so their limits together are bounded, across tenants.
func TestWasmMemoryBoundedInTotal(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *Config) {
		c.Backends["wasm"] = sandboxfake.New("wasm")
		c.WasmMemory = 1 << 30
	})
	ctx := context.Background()
	req := api.CreateSandboxRequest{Backend: "wasm", Policy: json.RawMessage(`{"limits":{"memory":"512Mi"}}`)}
	a, b := ts.tenant(t, "a"), ts.tenant(t, "b")
	first, err := a.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, req); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Create(ctx, req); !errors.Is(err, errdefs.ErrLimit) || !strings.Contains(err.Error(), "wasm") {
		t.Fatalf("a third 512 MiB wasm sandbox on a 1 GiB budget: %v", err)
	}
	if err := a.Delete(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, req); err != nil {
		t.Fatalf("after one was deleted: %v", err)
	}
}

// stepClock is a clock the test moves: AfterFunc's functions run when a
// step passes their time.
type stepClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*stepTimer
}

type stepTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func (t *stepTimer) Stop() bool { was := !t.stopped; t.stopped = true; return was }

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) AfterFunc(d time.Duration, f func()) interface{ Stop() bool } {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &stepTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

// step moves the time by d and runs, in this goroutine, what became due.
func (c *stepClock) step(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due, rest []*stepTimer
	for _, t := range c.timers {
		if !t.at.After(c.now) {
			due = append(due, t)
		} else {
			rest = append(rest, t)
		}
	}
	c.timers = rest
	c.mu.Unlock()
	for _, t := range due {
		if !t.stopped {
			t.f()
		}
	}
}
