package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/guestpath"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }

func encodingOf(v string) (string, error) {
	switch v {
	case "", "base64":
		return "base64", nil
	case "text":
		return "text", nil
	}
	return "", errBadRequest("encoding %q: want base64 or text", v)
}

func makeFrame(typ string, data []byte, off int64, enc string) api.Frame {
	f := api.Frame{Type: typ, Offset: off}
	if enc == "text" {
		f.Text = strings.ToValidUTF8(string(data), "\uFFFD")
	} else {
		f.Data = data
	}
	return f
}

// execRequest validates req and builds the sandbox request for l.
func (s *Server) execRequest(l *live, req *api.ExecRequest) (sandbox.ExecRequest, error) {
	if err := checkArgv(req.Args); err != nil {
		return sandbox.ExecRequest{}, err
	}
	if err := checkEnv(req.Env); err != nil {
		return sandbox.ExecRequest{}, err
	}
	if req.Dir != "" {
		d, err := guestpath.Clean(req.Dir)
		if err != nil {
			return sandbox.ExecRequest{}, err
		}
		req.Dir = d
	}
	// The proxy variables follow the current network mode (it may have
	// been opened through the API since the sandbox started).
	env := l.proxy.SandboxEnv()
	l.mu.Lock()
	maps.Copy(env, l.rec.Env)
	l.mu.Unlock()
	maps.Copy(env, req.Env)
	t := req.Timeout.D()
	if t == 0 {
		t = s.cfg.ExecTimeout
	}
	if len(req.User) > 256 || strings.ContainsAny(req.User, "\x00\n") {
		return sandbox.ExecRequest{}, errBadRequest("user %.40q: want USER[:GROUP]", req.User)
	}
	return sandbox.ExecRequest{Args: req.Args, Env: env, Dir: req.Dir, Timeout: t, User: req.User}, nil
}

// handleExec runs a command: buffered JSON by default, NDJSON frames with
// Accept: application/x-ndjson, SSE with Accept: text/event-stream, or in
// the background (201, a Process).
func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r)
	l, release := s.acquire(w, r)
	if l == nil {
		return
	}
	defer release()
	var req api.ExecRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	enc, err := encodingOf(req.Encoding)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sreq, err := s.execRequest(l, &req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.StdinStream && !req.Background {
		s.writeError(w, r, errBadRequest("stdin_stream needs background (then POST .../processes/{pid}/stdin)"))
		return
	}
	if req.StdinStream && len(req.Stdin) > 0 {
		s.writeError(w, r, errBadRequest("stdin and stdin_stream are exclusive"))
		return
	}
	s.events.emit(audit.Event{Sandbox: l.sb.ID(), Type: audit.TypeExec, Message: "exec through the API",
		Fields: map[string]any{"args": truncArgs(req.Args), "background": req.Background, "tenant": c.tenant}})
	if req.Background {
		if len(req.Stdin) > 0 {
			sreq.Stdin = bytes.NewReader(req.Stdin)
		}
		p, err := s.startBackground(l, sreq, req.StdinStream)
		if err != nil {
			s.writeError(w, r, fmt.Errorf("exec in %q: %w", l.sb.ID(), err))
			return
		}
		writeJSON(w, http.StatusCreated, p.view())
		return
	}
	if len(req.Stdin) > 0 {
		sreq.Stdin = bytes.NewReader(req.Stdin)
	}
	accept := r.Header.Get("Accept")
	if accept == "application/x-ndjson" || accept == "text/event-stream" {
		s.execStream(w, r, l, sreq, enc, accept == "text/event-stream")
		return
	}
	s.execBuffered(w, r, l, sreq, enc)
}

func truncArgs(a []string) []string {
	if len(a) > 32 {
		a = append(a[:32:32], fmt.Sprintf("... %d more", len(a)-32))
	}
	out := make([]string, len(a))
	for i, s := range a {
		if len(s) > 256 {
			s = s[:256] + "..."
		}
		out[i] = s
	}
	return out
}

// run starts sreq and waits, killing the process and its group if the
// client goes away. started is called once the process runs (before any output is
// delivered only if the backend buffers nothing; callers must not rely on it).
func (s *Server) run(ctx context.Context, l *live, sreq sandbox.ExecRequest, started func()) (sandbox.ExitStatus, error) {
	start := time.Now()
	p, err := l.sb.Exec(context.WithoutCancel(ctx), sreq)
	if err != nil {
		return sandbox.ExitStatus{}, fmt.Errorf("exec in %q: %w", l.sb.ID(), err)
	}
	if started != nil {
		started()
	}
	// No goroutine per exec: the kill is registered on ctx and runs only
	// if the client goes away first.
	stop := context.AfterFunc(ctx, func() {
		kctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = p.Kill(kctx) // the whole group: nothing it started lives on
		cancel()
	})
	ex, err := p.Wait(context.Background())
	stop()
	s.metrics.exec.WithLabelValues(l.backend).Observe(time.Since(start).Seconds())
	if err != nil {
		return ex, fmt.Errorf("exec in %q: %w", l.sb.ID(), err)
	}
	return ex, nil
}

func (s *Server) execBuffered(w http.ResponseWriter, r *http.Request, l *live, sreq sandbox.ExecRequest, enc string) {
	stdout, stderr := s.newSpillBufs(l)
	defer stdout.close()
	defer stderr.close()
	sreq.Stdout, sreq.Stderr = stdout, stderr
	start := time.Now()
	ex, err := s.run(r.Context(), l, sreq, nil)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	dur := time.Since(start)
	if stdout.detached() || stderr.detached() {
		s.writeError(w, r, errDetached) // a 409 naming the pause (explain)
		return
	}
	if stdout.isTruncated() || stderr.isTruncated() {
		ex.Truncated = true
	}
	writeExecResult(w, apiExit(ex), enc, stdout.reader(), stderr.reader(), dur)
}

// frameWriter turns writes into frames on a stream.
type frameWriter struct {
	fs  *frameStream
	typ string
}

// frameStream numbers output bytes and starts the response lazily, so a
// process that cannot start still gets a plain error status.
type frameStream struct {
	st      *streamWriter
	enc     string
	once    sync.Once
	mu      sync.Mutex
	off     int64
	stopped bool
}

func (f *frameStream) begin() { f.once.Do(f.st.start) }

func (f frameWriter) Write(p []byte) (int, error) {
	fs := f.fs
	fs.begin()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	off := fs.off
	fs.off += int64(len(p))
	if !fs.stopped {
		if err := fs.st.send(f.typ, makeFrame(f.typ, p, off, fs.enc)); err != nil {
			// The client went away; the request context kills the process.
			fs.stopped = true
		}
	}
	return len(p), nil
}

func (s *Server) execStream(w http.ResponseWriter, r *http.Request, l *live, sreq sandbox.ExecRequest, enc string, sse bool) {
	fs := &frameStream{st: newStreamWriter(w, sse), enc: enc}
	sreq.Stdout = frameWriter{fs, api.FrameStdout}
	sreq.Stderr = frameWriter{fs, api.FrameStderr}
	ex, err := s.run(r.Context(), l, sreq, fs.begin)
	if err != nil {
		started := false
		fs.once.Do(func() { started = true })
		if started {
			// Nothing was sent yet: a plain error answer.
			s.writeError(w, r, err)
			return
		}
		err = l.explain(err)
		_, code := statusOf(err)
		fs.mu.Lock()
		fs.st.send(api.FrameError, api.Frame{Type: api.FrameError, Offset: fs.off, Error: &api.ErrorInfo{Code: code, Message: err.Error()}})
		fs.mu.Unlock()
		return
	}
	fs.mu.Lock()
	fs.st.send(api.FrameExit, api.Frame{Type: api.FrameExit, Offset: fs.off, Exit: apiExitPtr(ex)})
	fs.mu.Unlock()
}
