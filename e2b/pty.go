package e2b

import (
	"context"
	"errors"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/e2b/envdpb"
)

// ptySession is a terminal process E2B started: the adapter holds its /v1
// PTY session (whose end would kill the process) so that streams may
// leave and attach again (Connect by pid) while it runs, as with envd.
type ptySession struct {
	t   *client.PTY
	cfg *envdpb.ProcessConfig
	tag string
	pid uint32

	mu   sync.Mutex
	subs map[int]chan *envdpb.ProcessEvent
	next int
	end  *envdpb.ProcessEvent_EndEvent
	done chan struct{}
}

func (p *processSvc) pty(id string, pid uint32) *ptySession {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ptys[procKey{id, pid}]
}

func (p *processSvc) startPTY(ctx context.Context, sc *scope, req *envdpb.StartRequest, every time.Duration, send func(*envdpb.ProcessEvent) error) error {
	cfg := req.GetProcess()
	size := req.GetPty().GetSize()
	o := client.PTYOptions{Args: append([]string{cfg.Cmd}, cfg.Args...), Env: sandboxEnv(sc, cfg.Envs),
		Dir: sc.resolve(cfg.GetCwd()), Rows: uint16(size.GetRows()), Cols: uint16(size.GetCols()), User: sc.user,
		Timeout: timeoutOf(ctx).D()}
	// The session outlives this stream: it ends with its process.
	t, err := sc.c.PTY(context.WithoutCancel(ctx), sc.id, o)
	if err != nil {
		return rpcErr(ctx, sc, err)
	}
	pid, err := t.PID(ctx)
	if err != nil || pid == 0 {
		t.Close()
		_, werr := t.Wait(context.Background())
		if werr == nil {
			werr = errors.New("the terminal session ended before its process started")
		}
		return rpcErr(ctx, sc, werr)
	}
	ps := &ptySession{t: t, cfg: cfg, tag: req.GetTag(), pid: uint32(pid), subs: map[int]chan *envdpb.ProcessEvent{}, done: make(chan struct{})}
	key := procKey{sc.id, ps.pid}
	p.mu.Lock()
	p.ptys[key] = ps
	p.mu.Unlock()
	sub, ch := ps.subscribe()
	go func() {
		ps.pump()
		p.mu.Lock()
		if p.ptys[key] == ps {
			delete(p.ptys, key)
		}
		p.mu.Unlock()
	}()
	return ps.stream(ctx, sub, ch, every, send)
}

func (ps *ptySession) subscribe() (int, chan *envdpb.ProcessEvent) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ch := make(chan *envdpb.ProcessEvent, 1024)
	ps.next++
	ps.subs[ps.next] = ch
	return ps.next, ch
}

func (ps *ptySession) unsubscribe(n int) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	delete(ps.subs, n)
}

// pump reads the terminal and hands its output to every attached stream;
// a stream that does not keep up loses what does not fit (as a client
// that is not attached loses it with envd).
func (ps *ptySession) pump() {
	buf := make([]byte, 16<<10)
	for {
		n, err := ps.t.Read(buf)
		if n > 0 {
			ev := &envdpb.ProcessEvent{Event: &envdpb.ProcessEvent_Data{Data: &envdpb.ProcessEvent_DataEvent{
				Output: &envdpb.ProcessEvent_DataEvent_Pty{Pty: append([]byte(nil), buf[:n]...)}}}}
			ps.mu.Lock()
			for _, ch := range ps.subs {
				select {
				case ch <- ev:
				default:
				}
			}
			ps.mu.Unlock()
		}
		if err != nil {
			break
		}
	}
	ex, err := ps.t.Wait(context.Background())
	ps.mu.Lock()
	if err == nil {
		ps.end = endEvent(ex)
	}
	ps.mu.Unlock()
	close(ps.done)
}

// attach streams the session to a Connect call.
func (ps *ptySession) attach(ctx context.Context, every time.Duration, send func(*envdpb.ProcessEvent) error) error {
	sub, ch := ps.subscribe()
	return ps.stream(ctx, sub, ch, every, send)
}

func (ps *ptySession) stream(ctx context.Context, sub int, ch chan *envdpb.ProcessEvent, every time.Duration, send func(*envdpb.ProcessEvent) error) error {
	defer ps.unsubscribe(sub)
	s := &sender{send: send, last: time.Now()}
	if err := s.emit(&envdpb.ProcessEvent{Event: &envdpb.ProcessEvent_Start{Start: &envdpb.ProcessEvent_StartEvent{Pid: ps.pid}}}); err != nil {
		return err
	}
	kctx, stop := context.WithCancel(ctx)
	defer stop()
	go s.keepAlive(kctx, every)
	for {
		select {
		case ev := <-ch:
			if err := s.emit(ev); err != nil {
				return err
			}
		case <-ps.done:
			for {
				select {
				case ev := <-ch:
					if err := s.emit(ev); err != nil {
						return err
					}
					continue
				default:
				}
				break
			}
			ps.mu.Lock()
			end := ps.end
			ps.mu.Unlock()
			if end == nil {
				abort() // the session broke: the sandbox ended under it
			}
			return s.emit(&envdpb.ProcessEvent{Event: &envdpb.ProcessEvent_End{End: end}})
		case <-ctx.Done():
			return connect.NewError(connect.CodeDeadlineExceeded, ctx.Err())
		}
	}
}
