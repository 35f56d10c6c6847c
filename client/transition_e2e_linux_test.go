package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

// hangGuard bounds every request of TestE2ERequestsAcrossLifecycle: far
// above what an answer takes on a loaded machine, so a request still
// unanswered then is one that would never have been.
const hangGuard = 2 * time.Minute

// storm fires every kind of request a client (the console) makes at one
// sandbox, each kind in a loop of its own, and records what each answered.
type storm struct {
	c    *client.Client
	id   string
	stop chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex
	change time.Time      // when the lifecycle change ended (zero: not yet)
	seen   map[string]int // answers per kind
	after  map[string]int // successes per kind of requests sent after the change
	bad    []string       // answers that are neither a success nor a clear refusal
}

func newStorm(c *client.Client, id string, kinds map[string]func(context.Context) error) *storm {
	st := &storm{c: c, id: id, stop: make(chan struct{}), seen: map[string]int{}, after: map[string]int{}}
	for kind, f := range kinds {
		st.wg.Add(1)
		go st.loop(kind, f)
	}
	return st
}

func (st *storm) loop(kind string, f func(context.Context) error) {
	defer st.wg.Done()
	for {
		select {
		case <-st.stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		sent := time.Now()
		err := f(ctx)
		hung := ctx.Err() != nil
		cancel()
		st.record(kind, sent, err, hung)
	}
}

func (st *storm) record(kind string, sent time.Time, err error, hung bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.seen[kind]++
	switch {
	case hung:
		st.bad = append(st.bad, fmt.Sprintf("%s sent at %s: no answer within %s (%v)", kind, sent.Format("15:04:05.000"), hangGuard, err))
	case err != nil && !clearRefusal(err):
		st.bad = append(st.bad, fmt.Sprintf("%s sent at %s: %v", kind, sent.Format("15:04:05.000"), err))
	case err == nil && !st.change.IsZero() && sent.After(st.change):
		st.after[kind]++
	}
}

// clearRefusal: a JSON error that says "not now" (409 conflict, 503
// unavailable), also as a terminal's error message.
func clearRefusal(err error) bool {
	var ce *client.Error
	if !errors.As(err, &ce) {
		return false
	}
	return ce.Status == http.StatusConflict || ce.Status == http.StatusServiceUnavailable ||
		(ce.Status == 0 && (ce.Code == api.CodeConflict || ce.Code == api.CodeUnavailable))
}

// waitFor polls cond on the storm's counters within the hang guard.
func (st *storm) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		st.mu.Lock()
		ok, seen, after, bad := cond(), fmt.Sprint(st.seen), fmt.Sprint(st.after), len(st.bad)
		st.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (answers %s, successes after the change %s, %d bad)", what, seen, after, bad)
		}
		time.Sleep(50 * time.Millisecond) // polling the storm's counters
	}
}

func (st *storm) each(m map[string]int, kinds map[string]func(context.Context) error) bool {
	for k := range kinds {
		if m[k] == 0 {
			return false
		}
	}
	return true
}

// end stops the storm and waits for its requests (each within the hang
// guard), then fails t with every bad answer.
func (st *storm) end(t *testing.T) {
	t.Helper()
	close(st.stop)
	st.wg.Wait()
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, b := range st.bad {
		t.Error(b)
	}
	t.Logf("answers: %v; successes sent after the change: %v", st.seen, st.after)
}

// requestKinds are the console's requests: the sandbox, the list of
// sandboxes, its file list, a file's preview, an exec, the events stream
// and a terminal. The sandbox
// may be seen paused only when paused says so (a rollback is no pause:
// the console would take its terminal away).
func requestKinds(c *client.Client, id string, paused bool) map[string]func(context.Context) error {
	return map[string]func(context.Context) error{
		"get": func(ctx context.Context) error {
			g, err := c.Get(ctx, id)
			if err == nil && g.State != "running" && (!paused || g.State != api.StatePaused) {
				return fmt.Errorf("get: state %s (%s)", g.State, g.Reason)
			}
			return err
		},
		"sandboxes": func(ctx context.Context) error {
			running, err := c.List(ctx, client.ListOptions{})
			if err != nil {
				return err
			}
			all, err := c.List(ctx, client.ListOptions{All: true})
			if err != nil {
				return err
			}
			inRunning := false
			for _, s := range running {
				inRunning = inRunning || s.ID == id
			}
			if !inRunning && !paused {
				return fmt.Errorf("sandboxes: %s not in the list of the running", id)
			}
			for _, s := range all {
				if s.ID != id {
					continue
				}
				if s.State != "running" && (!paused || s.State != api.StatePaused) {
					return fmt.Errorf("sandboxes: listed %s (%s)", s.State, s.Reason)
				}
				return nil
			}
			return fmt.Errorf("sandboxes: %s not listed", id)
		},
		"list": func(ctx context.Context) error {
			_, err := c.ListDir(ctx, id, "/workspace")
			return err
		},
		"read": func(ctx context.Context) error {
			rc, err := c.ReadFile(ctx, id, "/workspace/ck.txt")
			if err != nil {
				return err
			}
			defer rc.Close()
			_, err = io.ReadAll(rc)
			return err
		},
		"exec": func(ctx context.Context) error {
			_, err := c.Run(ctx, id, "cat", "/workspace/ck.txt")
			return err
		},
		"follow": func(ctx context.Context) error {
			first := errors.New("first event")
			err := c.FollowEvents(ctx, id, 0, func(api.Event) error { return first })
			if errors.Is(err, first) {
				return nil
			}
			return err
		},
		"pty": func(ctx context.Context) error { return ptyOnce(ctx, c, id) },
	}
}

// ptyOnce runs a short command on a terminal and reads it to its end: it
// must print and exit, or be refused.
func ptyOnce(ctx context.Context, c *client.Client, id string) error {
	p, err := c.PTY(ctx, id, client.PTYOptions{Args: []string{"sh", "-c", "echo pty-ready"}})
	if err != nil {
		return err
	}
	defer p.Close()
	out, _ := io.ReadAll(p)
	ex, err := p.Wait(ctx)
	if err != nil {
		return err
	}
	if ex.Code == 0 && !bytes.Contains(out, []byte("pty-ready")) {
		return fmt.Errorf("pty: exit 0 without its output (%q)", out)
	}
	return nil
}

// longLived is what a console holds open across a change: a terminal
// running cat and an events stream.
type longLived struct {
	pty    *client.PTY
	echo   chan string // what the terminal printed
	events chan api.Event
	marks  chan string // args of execs of followMark seen on the events stream
	done   chan error  // the events stream's end
}

// followMark starts the arguments of the execs eventsGoOn looks for.
const followMark = "follow-mark-"

func openLongLived(t *testing.T, c *client.Client, id string) *longLived {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*hangGuard)
	t.Cleanup(cancel)
	p, err := c.PTY(ctx, id, client.PTYOptions{Args: []string{"sh", "-c", "echo cat-ready; exec cat"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	ll := &longLived{pty: p, echo: make(chan string, 64), events: make(chan api.Event, 1024), marks: make(chan string, 16), done: make(chan error, 1)}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := p.Read(b)
			if n > 0 {
				ll.echo <- string(b[:n])
			}
			if err != nil {
				close(ll.echo)
				return
			}
		}
	}()
	ll.waitEcho(t, "cat-ready")
	go func() {
		ll.done <- c.FollowEvents(ctx, id, 0, func(e api.Event) error {
			if args := fmt.Sprint(e.Fields["args"]); e.Type == "exec" && strings.Contains(args, followMark) {
				select {
				case ll.marks <- args:
				default:
				}
			}
			select {
			case ll.events <- e:
			default:
			}
			return nil
		})
	}()
	select {
	case <-ll.events:
	case err := <-ll.done:
		t.Fatalf("events stream ended before its first event: %v", err)
	case <-time.After(hangGuard):
		t.Fatal("events stream: no first event within the hang guard")
	}
	return ll
}

// waitEcho waits for the terminal to print want.
func (ll *longLived) waitEcho(t *testing.T, want string) {
	t.Helper()
	var got strings.Builder
	timeout := time.After(hangGuard)
	for !strings.Contains(got.String(), want) {
		select {
		case s, ok := <-ll.echo:
			if !ok {
				t.Fatalf("terminal ended before printing %q (printed %q)", want, got.String())
			}
			got.WriteString(s)
		case <-timeout:
			t.Fatalf("terminal did not print %q within the hang guard (printed %q)", want, got.String())
		}
	}
}

// terminalEnded checks that the terminal ended (the sandbox's processes
// were restarted) within the hang guard.
func (ll *longLived) terminalEnded(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if _, err := ll.pty.Wait(ctx); err != nil && !clearRefusal(err) {
		t.Errorf("terminal open across the change: %v (want its exit status or a clear refusal)", err)
	}
}

// eventsGoOn checks that the events stream open across the change still
// delivers: an exec run after it shows up on it (within the hang guard).
func (ll *longLived) eventsGoOn(t *testing.T, c *client.Client, id string) {
	t.Helper()
	mark := followMark + id
	runOut(t, c, id, "true "+mark)
	timeout := time.After(hangGuard)
	for {
		select {
		case args := <-ll.marks:
			if strings.Contains(args, mark) {
				return
			}
		case err := <-ll.done:
			t.Fatalf("events stream open across the change ended (%v); it must go on while the sandbox exists", err)
		case <-timeout:
			t.Fatal("events stream open across the change: the exec run after it did not show within the hang guard")
		}
	}
}

// eventsEnded checks that the events stream ended cleanly within the
// hang guard (the sandbox was paused).
func (ll *longLived) eventsEnded(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	select {
	case err := <-ll.done:
		if err != nil {
			t.Errorf("events stream open across the change ended with %v", err)
		}
	case <-ctx.Done():
		t.Error("events stream open across the change did not end within the hang guard")
	}
}

// TestE2ERequestsAcrossLifecycle: while a rollback, a pause and resume, or
// a snapshot changes a sandbox, every request the console makes (the
// sandbox, its file list, a file, an exec, the events stream, a terminal)
// answers within the hang guard: it waits for the change and proceeds,
// or is refused with a clear 409/503; after the change each kind
// succeeds again. A terminal open across a rollback or pause ends (its
// processes restart); an events stream ends with a pause and goes on
// across a rollback (the sandbox still exists) and a snapshot; the list
// never shows a rollback as a pause.
// The console once waited forever after a rollback under load.
func TestE2ERequestsAcrossLifecycle(t *testing.T) {
	c := requireNative(t).client(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Policy: diskPolicy})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Delete(ctx, sb.ID)
	runOut(t, c, sb.ID, fillScript+"; for i in $(seq 200); do echo $i > f$i; done; echo original > ck.txt")
	cp, err := c.Checkpoint(ctx, sb.ID, "before")
	if err != nil {
		t.Fatal(err)
	}
	changes := []struct {
		name       string
		restart    bool // the sandbox's processes end
		paused     bool // it is seen paused for a while
		followEnds bool // an events stream ends with it
		do         func(context.Context) error
	}{
		{"rollback", true, false, false, func(ctx context.Context) error {
			runOut(t, c, sb.ID, "echo changed > /workspace/ck.txt")
			_, err := c.Rollback(ctx, sb.ID, cp.ID)
			return err
		}},
		{"pause-resume", true, true, true, func(ctx context.Context) error {
			if _, err := c.Pause(ctx, sb.ID); err != nil {
				return err
			}
			_, err := c.Resume(ctx, sb.ID)
			return err
		}},
		{"snapshot", false, false, false, func(ctx context.Context) error {
			snap, err := c.Snapshot(ctx, sb.ID, "")
			if err == nil {
				err = c.DeleteSnapshot(ctx, snap.ID)
			}
			return err
		}},
	}
	for _, ch := range changes {
		t.Run(ch.name, func(t *testing.T) {
			ll := openLongLived(t, c, sb.ID)
			kinds := requestKinds(c, sb.ID, ch.paused)
			st := newStorm(c, sb.ID, kinds)
			defer st.end(t)
			st.waitFor(t, "every kind to answer once before the change", func() bool { return st.each(st.seen, kinds) })
			cctx, cancel := context.WithTimeout(ctx, hangGuard)
			err := ch.do(cctx)
			cancel()
			if err != nil {
				t.Fatalf("%s: %v", ch.name, err)
			}
			st.mu.Lock()
			st.change = time.Now()
			st.mu.Unlock()
			st.waitFor(t, "every kind to succeed after the change", func() bool { return st.each(st.after, kinds) })
			if ch.followEnds {
				ll.eventsEnded(t)
			} else {
				ll.eventsGoOn(t, c, sb.ID)
			}
			if ch.restart {
				ll.terminalEnded(t)
				return
			}
			if _, err := ll.pty.Write([]byte("still-here\n")); err != nil {
				t.Fatalf("terminal across a snapshot: %v", err)
			}
			ll.waitEcho(t, "still-here")
		})
	}
}
