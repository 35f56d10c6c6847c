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
	"github.com/airlock-dev/airlock/sandbox"
)

// maxPTYMessage bounds one WebSocket message from the client.
const maxPTYMessage = 1 << 20

// handlePTY runs a command on a terminal over a WebSocket: the first text
// message is a PTYStart; then binary messages are keyboard input and text
// messages are PTYMessage controls (resize). The server sends terminal
// output as binary messages and ends with a text "exit" message.
func (s *Server) handlePTY(w http.ResponseWriter, r *http.Request) {
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
	start, ok, err := readPTYStart(ctx, conn)
	if !ok {
		return
	}
	if err == nil {
		err = s.runPTY(ctx, conn, l, callerOf(r), start)
	}
	if err != nil {
		ptyFail(conn, l.explain(err))
	}
}

// readPTYStart reads the session's first message. !ok: the client went
// away or was silent for 30s (nothing to answer); else err is what is
// wrong with the message.
func readPTYStart(ctx context.Context, conn *websocket.Conn) (start api.PTYStart, ok bool, err error) {
	startCtx, startCancel := context.WithTimeout(ctx, 30*time.Second)
	typ, data, err := conn.Read(startCtx)
	startCancel()
	if err != nil {
		return start, false, nil
	}
	if typ != websocket.MessageText {
		return start, true, errBadRequest("pty: the first message must be a JSON start message")
	}
	err = decodeJSONBytes(data, &start)
	return start, true, err
}

// runPTY starts start's command on a terminal in l, pumps the socket's
// input into it and, when it exits, sends the "exit" message and closes
// the socket. An error is for the caller to send (ptyFail).
func (s *Server) runPTY(ctx context.Context, conn *websocket.Conn, l *live, c caller, start api.PTYStart) error {
	ereq := api.ExecRequest{Args: start.Args, Env: start.Env, Dir: start.Dir, Timeout: start.Timeout, User: start.User}
	sreq, err := s.execRequest(l, &ereq)
	if err != nil {
		return err
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
		return fmt.Errorf("pty exec in %q: %w", l.sb.ID(), err)
	}
	if b, err := json.Marshal(api.PTYMessage{Type: "start", PID: p.PID()}); err == nil {
		conn.Write(ctx, websocket.MessageText, b)
	}
	go ptyInput(ctx, conn, p, inW)
	ex, err := p.Wait(context.Background())
	if err != nil {
		return fmt.Errorf("pty exec in %q: %w", l.sb.ID(), err)
	}
	b, _ := json.Marshal(api.PTYMessage{Type: "exit", Exit: apiExitPtr(ex)})
	// Not on ctx: the end of the sandbox's life (a rollback) cancels it,
	// and the client must still hear how the session ended.
	wctx, cancel := context.WithTimeout(context.Background(), ptyLastWrite)
	defer cancel()
	conn.Write(wctx, websocket.MessageText, b)
	conn.Close(websocket.StatusNormalClosure, "exited")
	return nil
}

// ptyInput pumps the socket into the terminal: binary messages are
// keyboard bytes for in, text messages resizes and "eof" (which closes in).
// When the socket closes it kills p.
func ptyInput(ctx context.Context, conn *websocket.Conn, p sandbox.Process, in *io.PipeWriter) {
	defer in.Close()
	for {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			kctx, kcancel := context.WithTimeout(context.Background(), 5*time.Second)
			p.Kill(kctx)
			kcancel()
			return
		}
		if typ == websocket.MessageBinary {
			if _, err := in.Write(data); err != nil {
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
			in.Close()
		}
	}
}

// ptyLastWrite bounds the last message of a session (exit, error) to a
// client that does not read.
const ptyLastWrite = 5 * time.Second

// ptyFail sends err as an "error" message and closes the socket with its
// code.
func ptyFail(conn *websocket.Conn, err error) {
	_, code := statusOf(err)
	b, _ := json.Marshal(api.PTYMessage{Type: "error", Error: &api.ErrorInfo{Code: code, Message: err.Error()}})
	ctx, cancel := context.WithTimeout(context.Background(), ptyLastWrite)
	defer cancel()
	conn.Write(ctx, websocket.MessageText, b)
	conn.Close(websocket.StatusPolicyViolation, code)
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
