package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/airlock-dev/airlock/sandbox"
)

// fakeGuest is a hostile guest: a yamux server that answers every stream
// with whatever behave writes. It stands in for a compromised agent to test
// the host's defences; the real agent is tested elsewhere.
func fakeGuest(t *testing.T, opts ClientOptions, behave func(st *yamux.Stream, req *request)) *Client {
	t.Helper()
	hc, gc := net.Pipe()
	sess, err := yamux.Server(gc, yamuxConfig(discardLogger(nil), 16))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			st, err := sess.AcceptStream()
			if err != nil {
				return
			}
			go func() {
				var req request
				if readHeader(st, &req, MaxRequestHeader) != nil {
					return
				}
				behave(st, &req)
			}()
		}
	}()
	c, err := NewClient(hc, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); sess.Close() })
	return c
}

func rawFrame(typ byte, n uint32, payload []byte) []byte {
	b := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], n)
	return append(b, payload...)
}

func rawHeader(v any) []byte {
	var buf bytes.Buffer
	writeHeader(&buf, v, MaxResponseHeader)
	return buf.Bytes()
}

func TestHostileGuest(t *testing.T) {
	ctx := testCtx(t)
	huge := []byte{0xff, 0xff, 0xff, 0xff}
	tests := []struct {
		name   string
		behave func(st *yamux.Stream, req *request)
		call   func(c *Client) error
		kind   error
		closes bool // the host must end the session
	}{
		{
			name:   "huge response header",
			behave: func(st *yamux.Stream, _ *request) { st.Write(huge) },
			call:   func(c *Client) error { return c.Ping(ctx) },
			kind:   sandbox.ErrClosed, closes: true,
		},
		{
			name:   "header not JSON",
			behave: func(st *yamux.Stream, _ *request) { st.Write([]byte{0, 0, 0, 3, 'x', 'y', 'z'}) },
			call:   func(c *Client) error { return c.Ping(ctx) },
			kind:   sandbox.ErrClosed, closes: true,
		},
		{
			name: "huge exec frame",
			behave: func(st *yamux.Stream, _ *request) {
				st.Write(rawHeader(&response{PID: 7}))
				st.Write(rawFrame(frameStdout, MaxFramePayload+1, nil))
			},
			call: func(c *Client) error {
				p, err := c.Exec(ctx, sandbox.ExecRequest{Args: []string{"x"}})
				if err != nil {
					return err
				}
				_, err = p.Wait(ctx)
				return err
			},
			kind: sandbox.ErrClosed, closes: true,
		},
		{
			name: "bad exit code",
			behave: func(st *yamux.Stream, _ *request) {
				st.Write(rawHeader(&response{PID: 7}))
				b, _ := json.Marshal(exitFrame{Code: 100000})
				st.Write(rawFrame(frameExit, uint32(len(b)), b))
			},
			call: func(c *Client) error {
				p, err := c.Exec(ctx, sandbox.ExecRequest{Args: []string{"x"}})
				if err != nil {
					return err
				}
				_, err = p.Wait(ctx)
				return err
			},
			kind: sandbox.ErrClosed, closes: true,
		},
		{
			name: "unsolicited credit",
			behave: func(st *yamux.Stream, _ *request) {
				st.Write(rawHeader(&response{PID: 7}))
				st.Write(rawFrame(frameCredit, 4, []byte{0, 0, 1, 0}))
			},
			call: func(c *Client) error {
				p, err := c.Exec(ctx, sandbox.ExecRequest{Args: []string{"x"}})
				if err != nil {
					return err
				}
				_, err = p.Wait(ctx)
				return err
			},
			kind: sandbox.ErrClosed, closes: true,
		},
		{
			name: "entry with a slash",
			behave: func(st *yamux.Stream, _ *request) {
				st.Write(rawHeader(&response{}))
				b, _ := json.Marshal([]wireFileInfo{{Name: "../../etc"}})
				st.Write(rawFrame(frameEntries, uint32(len(b)), b))
			},
			call: func(c *Client) error { _, err := c.Files().List(ctx, "/"); return err },
			kind: sandbox.ErrClosed, closes: true,
		},
		{
			name: "endless listing",
			behave: func(st *yamux.Stream, _ *request) {
				st.Write(rawHeader(&response{}))
				ents := make([]wireFileInfo, 5000)
				for i := range ents {
					ents[i].Name = "f"
				}
				b, _ := json.Marshal(ents)
				for {
					if _, err := st.Write(rawFrame(frameEntries, uint32(len(b)), b)); err != nil {
						return
					}
				}
			},
			call: func(c *Client) error { _, err := c.Files().List(ctx, "/"); return err },
			kind: sandbox.ErrLimit,
		},
		{
			name: "listing of huge links",
			behave: func(st *yamux.Stream, _ *request) {
				st.Write(rawHeader(&response{}))
				ents := make([]wireFileInfo, 200)
				for i := range ents {
					ents[i] = wireFileInfo{Name: "f", Link: strings.Repeat("l", MaxPathLen)}
				}
				b, _ := json.Marshal(ents)
				for {
					if _, err := st.Write(rawFrame(frameEntries, uint32(len(b)), b)); err != nil {
						return
					}
				}
			},
			call: func(c *Client) error {
				_, err := c.Files().List(ctx, "/")
				if err != nil && !strings.Contains(err.Error(), "bytes") {
					return fmt.Errorf("not the byte bound: %w", err)
				}
				return err
			},
			kind: sandbox.ErrLimit,
		},
		{
			name:   "never answers",
			behave: func(st *yamux.Stream, _ *request) {},
			call: func(c *Client) error {
				short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
				defer cancel()
				_, err := c.Files().Stat(short, "/")
				return err
			},
			kind: context.DeadlineExceeded,
		},
		{
			name: "exec never exits",
			behave: func(st *yamux.Stream, _ *request) {
				st.Write(rawHeader(&response{PID: 7}))
			},
			call: func(c *Client) error {
				p, err := c.Exec(ctx, sandbox.ExecRequest{Args: []string{"x"}})
				if err != nil {
					return err
				}
				short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
				defer cancel()
				_, err = p.Wait(short)
				return err
			},
			kind: context.DeadlineExceeded,
		},
		{
			name: "long error message",
			behave: func(st *yamux.Stream, _ *request) {
				st.Write(rawHeader(&response{Error: &wireError{Kind: "not_found", Msg: strings.Repeat("\x1b[2J", 5000)}}))
			},
			call: func(c *Client) error {
				err := c.Ping(ctx)
				if err != nil && (len(err.Error()) > 1000 || strings.Contains(err.Error(), "\x1b")) {
					return errors.New("unbounded or unsanitised message")
				}
				return err
			},
			kind: sandbox.ErrNotFound,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fakeGuest(t, ClientOptions{}, tt.behave)
			err := tt.call(c)
			if !errors.Is(err, tt.kind) {
				t.Fatalf("got %v, want %v", err, tt.kind)
			}
			select {
			case <-c.Done():
				if !tt.closes {
					t.Fatal("session closed")
				}
			default:
				if tt.closes {
					t.Fatal("session still open after a protocol violation")
				}
			}
		})
	}
}

// TestHostileGuestTimeoutBackstop: a guest that ignores the timeout and
// never reports an exit does not hang Wait without a deadline.
func TestHostileGuestTimeoutBackstop(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the kill grace")
	}
	c := fakeGuest(t, ClientOptions{}, func(st *yamux.Stream, _ *request) {
		st.Write(rawHeader(&response{PID: 7}))
		io.Copy(io.Discard, st)
	})
	p, err := c.Exec(testCtx(t), sandbox.ExecRequest{Args: []string{"x"}, Timeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait(context.Background())
	if !errors.Is(err, sandbox.ErrTimeout) || !st.TimedOut {
		t.Fatalf("status %+v err %v", st, err)
	}
}

// TestHostileGuestGoAway: a guest that stops accepting streams loses its
// session instead of leaving the host half-working.
func TestHostileGuestGoAway(t *testing.T) {
	hc, gc := net.Pipe()
	sess, err := yamux.Server(gc, yamuxConfig(discardLogger(nil), 16))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	c, err := NewClient(hc, ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sess.GoAway()
	ctx := testCtx(t)
	// Nothing serves streams here: a ping before the go-away arrived times
	// out or is reset, the first one after it ends the session.
	waitFor(t, func() bool {
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		c.Ping(short)
		select {
		case <-c.Done():
			return true
		default:
			return false
		}
	})
	if err := c.Ping(ctx); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("ping after go-away: %v", err)
	}
}

// TestHostileGuestNeverAccepts: a guest that takes no streams at all does
// not make calls outlive their contexts, however many are in flight.
func TestHostileGuestNeverAccepts(t *testing.T) {
	hc, gc := net.Pipe()
	sess, err := yamux.Server(gc, yamuxConfig(discardLogger(nil), 256))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	c, err := NewClient(hc, ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 100
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			errs <- c.Ping(ctx)
		}()
	}
	for i := 0; i < n; i++ {
		select {
		case err := <-errs:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("ping: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("a call outlived its context")
		}
	}
}
