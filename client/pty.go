package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/errdefs"
)

// PTYOptions describes a command to run on a terminal.
type PTYOptions struct {
	Args       []string
	Env        map[string]string
	Dir        string
	Rows, Cols uint16
	Timeout    time.Duration // wall-time limit; zero: the server's
	User       string        // USER[:GROUP] to run as; empty: the sandbox's
}

// PTY is a running terminal session: Read gives terminal output, Write
// sends keyboard input. Safe for one reader and one writer at a time.
type PTY struct {
	conn *websocket.Conn
	ctx  context.Context
	stop context.CancelFunc

	mu      sync.Mutex
	pid     int
	started chan struct{} // closed once the pid is known
	exit    *api.ExitStatus
	err     error
	done    chan struct{}
	rd      *io.PipeReader
}

// PTY starts o.Args on a terminal in sandbox id. ctx bounds the whole
// session, as it does Exec: when it ends, the connection closes and the
// server kills the process and its group; Wait then returns ctx's error.
func (c *Client) PTY(ctx context.Context, id string, o PTYOptions) (*PTY, error) {
	h := http.Header{}
	if c.key != "" {
		h.Set("Authorization", "Bearer "+c.key)
	}
	if id == "" {
		return nil, fmt.Errorf("airlock: pty: empty sandbox ID: %w", errdefs.ErrInvalid)
	}
	u := strings.Replace(c.base, "http", "ws", 1) + sbPath(id, "/pty")
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c.hc, HTTPHeader: h})
	if err != nil {
		if resp != nil && resp.StatusCode/100 != 1 && resp.StatusCode != 0 {
			return nil, decodeError(resp)
		}
		if derr := c.dialError(err); derr != nil {
			return nil, derr
		}
		return nil, fmt.Errorf("airlock: pty: %w", err)
	}
	conn.SetReadLimit(1 << 20)
	start, _ := json.Marshal(api.PTYStart{Args: o.Args, Env: o.Env, Dir: o.Dir, Rows: o.Rows, Cols: o.Cols, Timeout: api.Duration(o.Timeout), User: o.User})
	pctx, stop := context.WithCancel(ctx)
	if err := conn.Write(pctx, websocket.MessageText, start); err != nil {
		stop()
		conn.CloseNow()
		return nil, fmt.Errorf("airlock: pty: %w", err)
	}
	// The end of ctx closes the connection, which the server takes as the
	// end of the session. (The websocket library closes it only when ctx
	// ends during a read or write, not between two.)
	context.AfterFunc(pctx, func() { conn.CloseNow() })
	pr, pw := io.Pipe()
	p := &PTY{conn: conn, ctx: pctx, stop: stop, done: make(chan struct{}), started: make(chan struct{}), rd: pr}
	go p.readLoop(pw)
	return p, nil
}

func (p *PTY) readLoop(pw *io.PipeWriter) {
	defer close(p.done)
	for {
		typ, data, err := p.conn.Read(p.ctx)
		if err != nil {
			p.mu.Lock()
			if p.exit == nil && p.err == nil {
				if cerr := p.ctx.Err(); cerr != nil {
					p.err = fmt.Errorf("airlock: pty: %w", cerr)
				} else {
					p.err = fmt.Errorf("airlock: pty: connection ended without an exit status: %w", err)
				}
			}
			p.mu.Unlock()
			pw.Close()
			return
		}
		if typ == websocket.MessageBinary {
			if _, err := pw.Write(data); err != nil {
				// Reader closed: keep draining control messages.
				continue
			}
			continue
		}
		var m api.PTYMessage
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		p.mu.Lock()
		switch m.Type {
		case "start":
			if p.pid == 0 {
				p.pid = m.PID
				close(p.started)
			}
		case "exit":
			p.exit = m.Exit
		case "error":
			if m.Error != nil {
				p.err = errorOf(0, *m.Error)
			}
		}
		p.mu.Unlock()
	}
}

// PID is the process's ID inside the sandbox, once the server said it
// (servers before it did say none: 0 once the session ended).
func (p *PTY) PID(ctx context.Context) (int, error) {
	select {
	case <-p.started:
	case <-p.done:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid, nil
}

// Read reads terminal output; io.EOF after the process exited.
func (p *PTY) Read(b []byte) (int, error) { return p.rd.Read(b) }

// Write sends keyboard input.
func (p *PTY) Write(b []byte) (int, error) {
	if err := p.conn.Write(p.ctx, websocket.MessageBinary, b); err != nil {
		return 0, err
	}
	return len(b), nil
}

// CloseWrite ends the terminal's input: the process reads end of file
// (^D) once it has read what was written before.
func (p *PTY) CloseWrite() error {
	b, _ := json.Marshal(api.PTYMessage{Type: "eof"})
	return p.conn.Write(p.ctx, websocket.MessageText, b)
}

// Resize changes the terminal size.
func (p *PTY) Resize(ctx context.Context, rows, cols uint16) error {
	b, _ := json.Marshal(api.PTYMessage{Type: "resize", Rows: rows, Cols: cols})
	return p.conn.Write(ctx, websocket.MessageText, b)
}

// Wait waits for the process to end (reading output is the caller's job:
// drain Read concurrently) and returns its exit status.
func (p *PTY) Wait(ctx context.Context) (api.ExitStatus, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return api.ExitStatus{}, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exit != nil {
		return *p.exit, nil
	}
	return api.ExitStatus{}, p.err
}

// Close ends the session (the process is killed if still running).
func (p *PTY) Close() error {
	p.conn.Close(websocket.StatusNormalClosure, "client closed")
	p.stop()
	p.rd.Close()
	return nil
}
