package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/coder/websocket"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/audit"
)

// maxPTYMessage bounds one WebSocket message from the client.
const maxPTYMessage = 1 << 20

// handlePTY runs a command on a terminal over a WebSocket: the first text
// message is a PTYStart; then binary messages are keyboard input and text
// messages are PTYMessage controls (resize). The server sends terminal
// output as binary messages and ends with a text "exit" message.
func (s *Server) handlePTY(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r)
	l, release := s.acquire(w, r)
	if l == nil {
		return
	}
	defer release()
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept answered the request
	}
	defer conn.CloseNow()
	conn.SetReadLimit(maxPTYMessage)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-l.gone:
			cancel()
		case <-ctx.Done():
		}
	}()

	fail := func(err error) {
		_, code := statusOf(err)
		b, _ := json.Marshal(api.PTYMessage{Type: "error", Error: &api.ErrorInfo{Code: code, Message: err.Error()}})
		conn.Write(ctx, websocket.MessageText, b)
		conn.Close(websocket.StatusPolicyViolation, code)
	}
	startCtx, startCancel := context.WithTimeout(ctx, 30*time.Second)
	typ, data, err := conn.Read(startCtx)
	startCancel()
	if err != nil {
		return
	}
	var start api.PTYStart
	if typ != websocket.MessageText {
		fail(errBadRequest("pty: the first message must be a JSON start message"))
		return
	}
	if err := decodeJSONBytes(data, &start); err != nil {
		fail(err)
		return
	}
	ereq := api.ExecRequest{Args: start.Args, Env: start.Env, Dir: start.Dir, Timeout: start.Timeout}
	sreq, err := s.execRequest(l, &ereq)
	if err != nil {
		fail(err)
		return
	}
	sreq.TTY, sreq.Rows, sreq.Cols = true, start.Rows, start.Cols
	if sreq.Rows == 0 || sreq.Cols == 0 {
		sreq.Rows, sreq.Cols = 24, 80
	}
	inR, inW := io.Pipe()
	defer inW.Close()
	sreq.Stdin = inR
	sreq.Stdout = wsWriter{ctx: ctx, c: conn}
	s.events.emit(audit.Event{Sandbox: l.sb.ID(), Type: audit.TypeExec, Message: "pty exec through the API",
		Fields: map[string]any{"args": truncArgs(start.Args), "tenant": c.tenant, "tty": true}})
	p, err := l.sb.Exec(context.WithoutCancel(ctx), sreq)
	if err != nil {
		fail(fmt.Errorf("pty exec in %q: %w", l.sb.ID(), err))
		return
	}
	// Input pump: keyboard bytes and resizes; a closed socket kills the process.
	go func() {
		defer inW.Close()
		for {
			typ, data, err := conn.Read(ctx)
			if err != nil {
				kctx, kcancel := context.WithTimeout(context.Background(), 5*time.Second)
				p.Kill(kctx)
				kcancel()
				return
			}
			if typ == websocket.MessageBinary {
				if _, err := inW.Write(data); err != nil {
					return
				}
				continue
			}
			var m api.PTYMessage
			if err := decodeJSONBytes(data, &m); err != nil {
				continue
			}
			switch m.Type {
			case "resize":
				if m.Rows > 0 && m.Cols > 0 {
					p.Resize(ctx, m.Rows, m.Cols)
				}
			case "eof":
				inW.Close()
			}
		}
	}()
	ex, err := p.Wait(context.Background())
	if err != nil {
		fail(fmt.Errorf("pty exec in %q: %w", l.sb.ID(), err))
		return
	}
	b, _ := json.Marshal(api.PTYMessage{Type: "exit", Exit: apiExitPtr(ex)})
	conn.Write(ctx, websocket.MessageText, b)
	conn.Close(websocket.StatusNormalClosure, "exited")
}

type wsWriter struct {
	ctx context.Context
	c   *websocket.Conn
}

func (w wsWriter) Write(p []byte) (int, error) {
	if err := w.c.Write(w.ctx, websocket.MessageBinary, p); err != nil {
		return 0, err
	}
	return len(p), nil
}
