package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/e2b/envdpb"
)

// processSvc is envd's process.Process over /v1 background processes
// (output followed from the server's buffer, stdin streamed to it) and
// /v1 PTY sessions the adapter holds open.
type processSvc struct {
	e *envd

	mu    sync.Mutex
	procs map[procKey]*procMeta   // what E2B asked of a process /v1 does not keep
	ptys  map[procKey]*ptySession // live terminal sessions
}

type procKey struct {
	sandbox string
	pid     uint32
}

type procMeta struct {
	cfg  *envdpb.ProcessConfig
	tag  string
	v1ID string
}

// maxMeta bounds the remembered configs; beyond it the table starts over
// (List then shows a process's command line only).
const maxMeta = 16384

func newProcessSvc(e *envd) *processSvc {
	return &processSvc{e: e, procs: map[procKey]*procMeta{}, ptys: map[procKey]*ptySession{}}
}

// sandboxEnv is what every E2B process gets before its own variables.
func sandboxEnv(sc *scope, own map[string]string) map[string]string {
	env := map[string]string{"E2B_SANDBOX": "true", "E2B_SANDBOX_ID": sc.e2bID, "HOME": sc.home, "USER": sc.user, "LOGNAME": sc.user}
	for k, v := range own {
		env[k] = v
	}
	return env
}

// timeoutOf is the wall time a process may run: the stream's deadline
// (Connect-Timeout-Ms), or none.
func timeoutOf(ctx context.Context) api.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return api.Duration(max(time.Until(dl), time.Millisecond))
	}
	return 0
}

func (p *processSvc) Start(ctx context.Context, req *connect.Request[envdpb.StartRequest], st *connect.ServerStream[envdpb.StartResponse]) error {
	sc := scopeOf(ctx)
	cfg := req.Msg.GetProcess()
	if cfg == nil || cfg.Cmd == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd: required"))
	}
	send := func(ev *envdpb.ProcessEvent) error { return st.Send(&envdpb.StartResponse{Event: ev}) }
	if req.Msg.Pty != nil {
		return p.startPTY(ctx, sc, req.Msg, keepalive(req.Header()), send)
	}
	stdin := req.Msg.Stdin == nil || *req.Msg.Stdin
	ereq := api.ExecRequest{Args: append([]string{cfg.Cmd}, cfg.Args...), Env: sandboxEnv(sc, cfg.Envs),
		Dir: sc.resolve(cfg.GetCwd()), User: sc.user, StdinStream: stdin, Timeout: timeoutOf(ctx)}
	proc, err := sc.c.StartProcess(context.WithoutCancel(ctx), sc.id, ereq)
	if err != nil {
		if statusOf(err) == http.StatusNotFound && strings.Contains(messageOf(err), ereq.Dir) {
			return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd '%s' does not exist", ereq.Dir))
		}
		return rpcErr(ctx, sc, err)
	}
	pid := uint32(proc.PID)
	p.remember(sc.id, pid, &procMeta{cfg: cfg, tag: req.Msg.GetTag(), v1ID: proc.ID})
	if err := send(&envdpb.ProcessEvent{Event: &envdpb.ProcessEvent_Start{Start: &envdpb.ProcessEvent_StartEvent{Pid: pid}}}); err != nil {
		return err
	}
	return p.follow(ctx, sc, proc.ID, 0, keepalive(req.Header()), send)
}

func (p *processSvc) remember(id string, pid uint32, m *procMeta) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.procs) >= maxMeta {
		p.procs = map[procKey]*procMeta{}
	}
	p.procs[procKey{id, pid}] = m
}

func (p *processSvc) meta(id string, pid uint32) *procMeta {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.procs[procKey{id, pid}]
}

// keepalive is the silence after which a stream sends a keepalive event
// (the client's Keepalive-Ping-Interval, seconds; default 90 s).
func keepalive(h http.Header) time.Duration {
	if n, err := strconv.Atoi(h.Get("Keepalive-Ping-Interval")); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return 90 * time.Second
}

// sender serializes a stream's sends and sends a keepalive event after
// every interval of silence.
type sender struct {
	mu   sync.Mutex
	send func(*envdpb.ProcessEvent) error
	last time.Time
}

func (s *sender) emit(ev *envdpb.ProcessEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = time.Now()
	return s.send(ev)
}

func (s *sender) keepAlive(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.mu.Lock()
			if time.Since(s.last) >= every {
				s.last = time.Now()
				s.send(&envdpb.ProcessEvent{Event: &envdpb.ProcessEvent_Keepalive{Keepalive: &envdpb.ProcessEvent_KeepAlive{}}})
			}
			s.mu.Unlock()
		}
	}
}

// dataWriter sends what is written as data events of one kind.
type dataWriter struct {
	s      *sender
	stderr bool
}

func (w dataWriter) Write(b []byte) (int, error) {
	d := &envdpb.ProcessEvent_DataEvent{Output: &envdpb.ProcessEvent_DataEvent_Stdout{Stdout: append([]byte(nil), b...)}}
	if w.stderr {
		d.Output = &envdpb.ProcessEvent_DataEvent_Stderr{Stderr: append([]byte(nil), b...)}
	}
	if err := w.s.emit(&envdpb.ProcessEvent{Event: &envdpb.ProcessEvent_Data{Data: d}}); err != nil {
		return 0, err
	}
	return len(b), nil
}

// follow streams /v1 process v1ID's output from offset and then its end.
// A sandbox that ends meanwhile cuts the stream (abort).
func (p *processSvc) follow(ctx context.Context, sc *scope, v1ID string, offset int64, every time.Duration, send func(*envdpb.ProcessEvent) error) error {
	s := &sender{send: send, last: time.Now()}
	kctx, stop := context.WithCancel(ctx)
	defer stop()
	go s.keepAlive(kctx, every)
	ex, err := sc.c.Output(ctx, sc.id, v1ID, client.OutputOptions{Offset: offset, Follow: true,
		Stdout: dataWriter{s: s}, Stderr: dataWriter{s: s, stderr: true}})
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return rpcErr(ctx, sc, ctx.Err())
		}
		if _, ok := sc.running(context.WithoutCancel(ctx)); !ok {
			abort()
		}
		return rpcErr(ctx, sc, err)
	}
	if ex.TimedOut {
		return connect.NewError(connect.CodeDeadlineExceeded, errors.New("process timed out"))
	}
	return s.emit(&envdpb.ProcessEvent{Event: &envdpb.ProcessEvent_End{End: endEvent(ex)}})
}

// endEvent is envd's end event for ex: exit code (-1 when a signal ended
// it), and Go's wording of how it ended.
func endEvent(ex api.ExitStatus) *envdpb.ProcessEvent_EndEvent {
	end := &envdpb.ProcessEvent_EndEvent{ExitCode: int32(ex.Code), Exited: true, Status: fmt.Sprintf("exit status %d", ex.Code)}
	if ex.Signal != 0 {
		end.ExitCode, end.Exited, end.Status = -1, false, "signal: "+signalName(ex.Signal)
	}
	if end.ExitCode != 0 {
		e := end.Status
		end.Error = &e
	}
	return end
}

func signalName(n int) string {
	switch n {
	case 1:
		return "hangup"
	case 2:
		return "interrupt"
	case 3:
		return "quit"
	case 6:
		return "aborted"
	case 9:
		return "killed"
	case 11:
		return "segmentation fault"
	case 13:
		return "broken pipe"
	case 15:
		return "terminated"
	}
	return "signal " + strconv.Itoa(n)
}

// find returns the /v1 process of sandbox sc.id with pid.
func (p *processSvc) find(ctx context.Context, sc *scope, pid uint32) (*api.Process, error) {
	l, err := sc.c.Processes(ctx, sc.id)
	if err != nil {
		return nil, rpcErr(ctx, sc, err)
	}
	for i := range l {
		if uint32(l[i].PID) == pid {
			return &l[i], nil
		}
	}
	return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", pid))
}

// selected resolves a selector to a pid (a tag by the remembered tags).
func (p *processSvc) selected(sc *scope, sel *envdpb.ProcessSelector) (uint32, error) {
	switch s := sel.GetSelector().(type) {
	case *envdpb.ProcessSelector_Pid:
		return s.Pid, nil
	case *envdpb.ProcessSelector_Tag:
		p.mu.Lock()
		defer p.mu.Unlock()
		for k, m := range p.procs {
			if k.sandbox == sc.id && m.tag == s.Tag {
				return k.pid, nil
			}
		}
		for k, ps := range p.ptys {
			if k.sandbox == sc.id && ps.tag == s.Tag {
				return k.pid, nil
			}
		}
		return 0, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with tag %s not found", s.Tag))
	}
	return 0, connect.NewError(connect.CodeInvalidArgument, errors.New("process selector: pid or tag required"))
}

func (p *processSvc) Connect(ctx context.Context, req *connect.Request[envdpb.ConnectRequest], st *connect.ServerStream[envdpb.ConnectResponse]) error {
	sc := scopeOf(ctx)
	pid, err := p.selected(sc, req.Msg.GetProcess())
	if err != nil {
		return err
	}
	send := func(ev *envdpb.ProcessEvent) error { return st.Send(&envdpb.ConnectResponse{Event: ev}) }
	if ps := p.pty(sc.id, pid); ps != nil {
		return ps.attach(ctx, keepalive(req.Header()), send)
	}
	proc, err := p.find(ctx, sc, pid)
	if err != nil {
		return err
	}
	if err := send(&envdpb.ProcessEvent{Event: &envdpb.ProcessEvent_Start{Start: &envdpb.ProcessEvent_StartEvent{Pid: pid}}}); err != nil {
		return err
	}
	return p.follow(ctx, sc, proc.ID, proc.OutputBytes, keepalive(req.Header()), send)
}

func (p *processSvc) List(ctx context.Context, req *connect.Request[envdpb.ListRequest]) (*connect.Response[envdpb.ListResponse], error) {
	sc := scopeOf(ctx)
	l, err := sc.c.Processes(ctx, sc.id)
	if err != nil {
		return nil, rpcErr(ctx, sc, err)
	}
	out := &envdpb.ListResponse{}
	for _, proc := range l {
		if !proc.Running {
			continue
		}
		pid := uint32(proc.PID)
		info := &envdpb.ProcessInfo{Pid: pid}
		if m := p.meta(sc.id, pid); m != nil && m.v1ID == proc.ID {
			info.Config = m.cfg
			if m.tag != "" {
				info.Tag = &m.tag
			}
		} else if len(proc.Args) > 0 {
			info.Config = &envdpb.ProcessConfig{Cmd: proc.Args[0], Args: proc.Args[1:]}
		}
		out.Processes = append(out.Processes, info)
	}
	p.mu.Lock()
	for k, ps := range p.ptys {
		if k.sandbox == sc.id {
			info := &envdpb.ProcessInfo{Pid: k.pid, Config: ps.cfg}
			if ps.tag != "" {
				info.Tag = &ps.tag
			}
			out.Processes = append(out.Processes, info)
		}
	}
	p.mu.Unlock()
	return connect.NewResponse(out), nil
}
