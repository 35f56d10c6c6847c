package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"

	"github.com/coder/websocket"

	"github.com/airlock-dev/airlock/sandbox"
)

// maxMessage bounds one DevTools message (a full-page screenshot is the
// largest: base64 PNG).
const maxMessage = 64 << 20

// cdp is one DevTools protocol connection: requests with IDs, their
// answers, and the events the caller waits for.
type cdp struct {
	ws *websocket.Conn

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan cdpMessage
	waiters []*waiter
	err     error // why the connection ended
	done    chan struct{}
}

type cdpMessage struct {
	ID        int64           `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// waiter is a caller waiting for an event (method) of a session.
type waiter struct {
	method, session string
	ch              chan json.RawMessage
}

// dialCDP opens the browser's DevTools websocket at wsURL, every byte
// through dial (a stream into the sandbox).
func dialCDP(ctx context.Context, wsURL string, dial func(ctx context.Context) (net.Conn, error)) (*cdp, error) {
	hc := &http.Client{Transport: &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		DisableKeepAlives: true,
	}}
	ws, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		return nil, fmt.Errorf("devtools websocket: %v: %w", err, sandbox.ErrUnavailable)
	}
	ws.SetReadLimit(maxMessage)
	c := &cdp{ws: ws, pending: map[int64]chan cdpMessage{}, done: make(chan struct{})}
	go c.readLoop()
	return c, nil
}

func (c *cdp) readLoop() {
	var err error
	for {
		var b []byte
		_, b, err = c.ws.Read(context.Background())
		if err != nil {
			break
		}
		var m cdpMessage
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		c.mu.Lock()
		if m.ID != 0 {
			if ch, ok := c.pending[m.ID]; ok {
				delete(c.pending, m.ID)
				ch <- m
			}
		} else if m.Method != "" {
			kept := c.waiters[:0]
			for _, w := range c.waiters {
				if w.method == m.Method && w.session == m.SessionID {
					w.ch <- m.Params
					continue
				}
				kept = append(kept, w)
			}
			c.waiters = kept
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	c.err = err
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
	}
	c.mu.Unlock()
	close(c.done)
}

// call sends method with params on session ("" for the browser) and
// decodes the answer's result into out (nil: ignored).
func (c *cdp) call(ctx context.Context, session, method string, params, out any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	ch := make(chan cdpMessage, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return fmt.Errorf("devtools %s: connection closed: %w", method, sandbox.ErrClosed)
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()
	msg, _ := json.Marshal(cdpMessage{ID: id, Method: method, Params: p, SessionID: session})
	if err := c.ws.Write(ctx, websocket.MessageText, msg); err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return fmt.Errorf("devtools %s: %v: %w", method, err, sandbox.ErrClosed)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return fmt.Errorf("devtools %s: connection closed: %w", method, sandbox.ErrClosed)
		}
		if m.Error != nil {
			return fmt.Errorf("devtools %s: %s (%d): %w", method, m.Error.Message, m.Error.Code, sandbox.ErrInvalid)
		}
		if out != nil {
			if err := json.Unmarshal(m.Result, out); err != nil {
				return fmt.Errorf("devtools %s: bad answer: %v: %w", method, err, sandbox.ErrUnavailable)
			}
		}
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return fmt.Errorf("devtools %s: %w", method, errors.Join(ctx.Err(), sandbox.ErrTimeout))
	}
}

// expect registers interest in the next event method of session; call
// the returned function to wait for it.
func (c *cdp) expect(session, method string) func(ctx context.Context) error {
	w := &waiter{method: method, session: session, ch: make(chan json.RawMessage, 1)}
	c.mu.Lock()
	c.waiters = append(c.waiters, w)
	c.mu.Unlock()
	return func(ctx context.Context) error {
		defer func() {
			c.mu.Lock()
			for i, o := range c.waiters {
				if o == w {
					c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
					break
				}
			}
			c.mu.Unlock()
		}()
		select {
		case <-w.ch:
			return nil
		case <-c.done:
			return fmt.Errorf("devtools: connection closed waiting for %s: %w", method, sandbox.ErrClosed)
		case <-ctx.Done():
			return fmt.Errorf("devtools: waiting for %s: %w", method, errors.Join(ctx.Err(), sandbox.ErrTimeout))
		}
	}
}

func (c *cdp) close() { c.ws.Close(websocket.StatusNormalClosure, "") }
