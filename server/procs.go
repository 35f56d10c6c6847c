package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/outbuf"
)

// proc is a background process and its bounded output.
type proc struct {
	id      string
	args    []string
	p       sandbox.Process
	out     *outbuf.Buf
	started time.Time

	stdinMu sync.Mutex
	stdin   *io.PipeWriter // nil unless stdin_stream
	stdinIn bool           // a stdin request is streaming now

	done  chan struct{}
	exit  sandbox.ExitStatus
	err   error
	ended time.Time
}

func (p *proc) closeStdin() {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin != nil {
		p.stdin.Close()
		p.stdin = nil
	}
}

func (p *proc) view() api.Process {
	v := api.Process{ID: p.id, PID: p.p.PID(), Args: p.args, StartedAt: p.started, OutputBytes: p.out.Written()}
	select {
	case <-p.done:
		v.Exit, v.EndedAt = apiExitPtr(p.exit), p.ended
	default:
		v.Running = true
	}
	return v
}

// Per-sandbox bounds on background processes: each holds up to
// ProcessBuffer bytes of output, so these bound the server's memory per
// sandbox. Finished processes beyond maxFinishedProcs are forgotten, oldest
// first.
const (
	maxProcsPerSandbox = 64
	maxFinishedProcs   = 16
)

// startBackground starts req as a background process of l.
func (s *Server) startBackground(l *live, req sandbox.ExecRequest, stdinStream bool) (*proc, error) {
	l.mu.Lock()
	running := 0
	var finished []*proc
	for _, p := range l.procs {
		select {
		case <-p.done:
			finished = append(finished, p)
		default:
			running++
		}
	}
	// Processes being started count too: the check and the start are one
	// step under the lock, so concurrent requests cannot all pass it.
	if n := running + l.starting; n >= maxProcsPerSandbox {
		l.mu.Unlock() // n read under the lock: l.starting moves with other requests
		return nil, fmt.Errorf("exec in %q: %d background processes running or starting, the most a sandbox may have: %w", l.sb.ID(), n, sandbox.ErrLimit)
	}
	l.starting++
	if len(finished) >= maxFinishedProcs {
		sort.Slice(finished, func(i, j int) bool { return finished[i].ended.Before(finished[j].ended) })
		for _, p := range finished[:len(finished)-maxFinishedProcs+1] {
			delete(l.procs, p.id)
		}
	}
	l.nextProc++
	id := "p" + strconv.Itoa(l.nextProc)
	l.mu.Unlock()

	p := &proc{id: id, args: req.Args, out: outbuf.New(s.cfg.ProcessBuffer), started: time.Now().UTC(), done: make(chan struct{})}
	var pr *io.PipeReader
	if stdinStream {
		pr, p.stdin = io.Pipe()
		req.Stdin = pr
	}
	req.Stdout, req.Stderr = p.out.Writer(api.FrameStdout), p.out.Writer(api.FrameStderr)
	// The process outlives the request that started it.
	sp, err := l.sb.Exec(context.WithoutCancel(s.ctx), req)
	if err != nil {
		l.mu.Lock()
		l.starting--
		l.mu.Unlock()
		if pr != nil {
			pr.Close()
		}
		return nil, err
	}
	p.p = sp
	l.mu.Lock()
	l.starting--
	l.procs[id] = p
	l.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ex, err := sp.Wait(context.Background())
		p.exit, p.err, p.ended = ex, err, time.Now().UTC()
		p.out.Close()
		p.closeStdin()
		if pr != nil {
			pr.Close()
		}
		close(p.done)
		l.touch()
	}()
	return p, nil
}

func (s *Server) procOf(r *http.Request) (*live, *proc, error) {
	l, err := s.lookupLive(r.Context(), callerOf(r).tenant, r.PathValue("id"))
	if err != nil {
		return nil, nil, err
	}
	pid := r.PathValue("pid")
	l.mu.Lock()
	p := l.procs[pid]
	l.mu.Unlock()
	if p == nil {
		return nil, nil, fmt.Errorf("process %q in %q: %w", pid, l.sb.ID(), sandbox.ErrNotFound)
	}
	return l, p, nil
}

func (s *Server) handleProcList(w http.ResponseWriter, r *http.Request) {
	l, err := s.lookupLive(r.Context(), callerOf(r).tenant, r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	l.touch()
	l.mu.Lock()
	out := api.ProcessList{Processes: []api.Process{}}
	for _, p := range l.procs {
		out.Processes = append(out.Processes, p.view())
	}
	l.mu.Unlock()
	sort.Slice(out.Processes, func(i, j int) bool { return out.Processes[i].StartedAt.Before(out.Processes[j].StartedAt) })
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleProcGet(w http.ResponseWriter, r *http.Request) {
	l, p, err := s.procOf(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	l.touch()
	writeJSON(w, http.StatusOK, p.view())
}

// handleProcDelete kills the process and its group (if running) and
// forgets it.
func (s *Server) handleProcDelete(w http.ResponseWriter, r *http.Request) {
	l, p, err := s.procOf(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer l.use()()
	select {
	case <-p.done:
	default:
		if err := p.p.Kill(r.Context()); err != nil {
			s.writeError(w, r, err)
			return
		}
		select {
		case <-p.done:
		case <-r.Context().Done():
			s.writeError(w, r, r.Context().Err())
			return
		}
	}
	l.mu.Lock()
	delete(l.procs, p.id)
	l.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleProcSignal(w http.ResponseWriter, r *http.Request) {
	l, p, err := s.procOf(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer l.use()()
	var req api.SignalRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	if req.Signal == 0 {
		req.Signal = sandbox.SIGKILL
	}
	if req.Signal < 1 || req.Signal > 64 {
		s.writeError(w, r, errBadRequest("signal %d: want 1..64", req.Signal))
		return
	}
	select {
	case <-p.done:
		s.writeError(w, r, errExited("signal", p.id))
		return
	default:
	}
	if err := p.p.Signal(r.Context(), req.Signal); err != nil {
		s.writeError(w, r, fmt.Errorf("signal process %q: %w", p.id, err))
		return
	}
	writeJSON(w, http.StatusOK, p.view())
}

// handleProcWait blocks until the process exits (or ?timeout= passes: 408
// style timeout answered as 504 with code "timeout").
func (s *Server) handleProcWait(w http.ResponseWriter, r *http.Request) {
	l, p, err := s.procOf(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer l.use()()
	ctx := r.Context()
	if v := r.URL.Query().Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			s.writeError(w, r, errBadRequest("timeout %q: want a duration", v))
			return
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	select {
	case <-p.done:
		writeJSON(w, http.StatusOK, p.view())
	case <-l.gone:
		s.writeError(w, r, fmt.Errorf("wait process %q: %w", p.id, sandbox.ErrClosed))
	case <-ctx.Done():
		s.writeError(w, r, fmt.Errorf("wait process %q: %w", p.id, sandbox.ErrTimeout))
	}
}

// handleProcOutput streams the buffered output from ?offset= (default 0,
// the oldest kept) as NDJSON or SSE frames; with follow=true it waits for
// more until the process exits and ends with an exit frame.
func (s *Server) handleProcOutput(w http.ResponseWriter, r *http.Request) {
	l, p, err := s.procOf(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer l.use()()
	q := r.URL.Query()
	var off int64
	if v := q.Get("offset"); v != "" {
		if off, err = strconv.ParseInt(v, 10, 64); err != nil || off < 0 {
			s.writeError(w, r, errBadRequest("offset %q: want a byte offset", v))
			return
		}
	}
	enc, err := encodingOf(q.Get("encoding"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	follow := q.Get("follow") == "true"
	st := newStreamWriter(w, acceptsSSE(r))
	st.start()
	for {
		chunks, first, ended, wake := p.out.Read(off)
		if first > off {
			if st.send(api.FrameDropped, api.Frame{Type: api.FrameDropped, Offset: first}) != nil {
				return
			}
			off = first
		}
		for _, c := range chunks {
			if st.send(c.Stream, makeFrame(c.Stream, c.Data, c.Off, enc)) != nil {
				return
			}
			off = c.Off + int64(len(c.Data))
		}
		if ended || !follow {
			if ended {
				<-p.done
				f := api.Frame{Type: api.FrameExit, Offset: off, Exit: apiExitPtr(p.exit)}
				if p.err != nil {
					st, code := statusOf(p.err)
					_ = st
					f = api.Frame{Type: api.FrameError, Offset: off, Error: &api.ErrorInfo{Code: code, Message: p.err.Error()}}
				}
				st.send(f.Type, f)
			}
			return
		}
		select {
		case <-wake:
		case <-r.Context().Done():
			return
		case <-l.gone:
			return
		}
	}
}

// handleProcStdin copies the request body to the process's stdin; with
// eof=true (the default) stdin is closed after the body ends.
func (s *Server) handleProcStdin(w http.ResponseWriter, r *http.Request) {
	l, p, err := s.procOf(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer l.use()()
	eof := r.URL.Query().Get("eof") != "false"
	select {
	case <-p.done:
		s.writeError(w, r, errExited("stdin of", p.id))
		return
	default:
	}
	p.stdinMu.Lock()
	pw := p.stdin
	if pw == nil || p.stdinIn {
		p.stdinMu.Unlock()
		s.writeError(w, r, fmt.Errorf("stdin of process %q: not open for streaming (start with stdin_stream) or already being written: %w", p.id, sandbox.ErrInvalid))
		return
	}
	p.stdinIn = true
	p.stdinMu.Unlock()
	defer func() {
		p.stdinMu.Lock()
		p.stdinIn = false
		p.stdinMu.Unlock()
	}()
	n, err := io.Copy(pw, http.MaxBytesReader(w, r.Body, s.cfg.MaxUpload))
	if err != nil {
		if isMaxBytes(err) {
			s.writeError(w, r, errTooLarge("stdin", s.cfg.MaxUpload))
			return
		}
		if err == io.ErrClosedPipe {
			s.writeError(w, r, errExited("stdin of", p.id))
			return
		}
		s.writeError(w, r, fmt.Errorf("stdin of process %q: %w", p.id, sandbox.ErrInvalid))
		return
	}
	if eof {
		p.closeStdin()
	}
	writeJSON(w, http.StatusOK, map[string]int64{"written": n})
}

// errExited: the process ended (the sandbox lives on), so there is no
// process to give input or a signal to.
func errExited(op, id string) error {
	return fmt.Errorf("%s process %q: the process has exited: %w", op, id, sandbox.ErrNotFound)
}

func isMaxBytes(err error) bool {
	var mbe *http.MaxBytesError
	return errorsAs(err, &mbe)
}
