package e2b

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	"github.com/airlock-dev/airlock/e2b/envdpb"
)

// input writes in to process pid: a terminal's keyboard or a process's
// stdin (kept open).
func (p *processSvc) input(ctx context.Context, sc *scope, pid uint32, in *envdpb.ProcessInput) error {
	if ps := p.pty(sc.id, pid); ps != nil {
		data := in.GetPty()
		if data == nil {
			data = in.GetStdin()
		}
		if _, err := ps.t.Write(data); err != nil {
			return connect.NewError(connect.CodeInternal, fmt.Errorf("write to the terminal of %d: %w", pid, err))
		}
		return nil
	}
	if in.GetPty() != nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("process %d has no terminal", pid))
	}
	proc, err := p.find(ctx, sc, pid)
	if err != nil {
		return err
	}
	if err := sc.c.WriteStdin(ctx, sc.id, proc.ID, bytes.NewReader(in.GetStdin()), false); err != nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("stdin of process %d: %s", pid, messageOf(err)))
	}
	return nil
}

func (p *processSvc) SendInput(ctx context.Context, req *connect.Request[envdpb.SendInputRequest]) (*connect.Response[envdpb.SendInputResponse], error) {
	sc := scopeOf(ctx)
	pid, err := p.selected(sc, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.input(ctx, sc, pid, req.Msg.GetInput()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&envdpb.SendInputResponse{}), nil
}

func (p *processSvc) StreamInput(ctx context.Context, st *connect.ClientStream[envdpb.StreamInputRequest]) (*connect.Response[envdpb.StreamInputResponse], error) {
	sc := scopeOf(ctx)
	var pid uint32
	for st.Receive() {
		switch ev := st.Msg().GetEvent().(type) {
		case *envdpb.StreamInputRequest_Start:
			n, err := p.selected(sc, ev.Start.GetProcess())
			if err != nil {
				return nil, err
			}
			pid = n
		case *envdpb.StreamInputRequest_Data:
			if pid == 0 {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("stream input: data before start"))
			}
			if err := p.input(ctx, sc, pid, ev.Data.GetInput()); err != nil {
				return nil, err
			}
		}
	}
	if err := st.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&envdpb.StreamInputResponse{}), nil
}

func (p *processSvc) CloseStdin(ctx context.Context, req *connect.Request[envdpb.CloseStdinRequest]) (*connect.Response[envdpb.CloseStdinResponse], error) {
	sc := scopeOf(ctx)
	pid, err := p.selected(sc, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if p.pty(sc.id, pid) != nil {
		return nil, connect.NewError(connect.CodeUnknown, errors.New("a terminal has no stdin to close: send Ctrl-D"))
	}
	proc, err := p.find(ctx, sc, pid)
	if err != nil {
		return nil, err
	}
	if err := sc.c.WriteStdin(ctx, sc.id, proc.ID, bytes.NewReader(nil), true); err != nil && proc.Running {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("close stdin of process %d: %s", pid, messageOf(err)))
	}
	return connect.NewResponse(&envdpb.CloseStdinResponse{}), nil
}

func (p *processSvc) SendSignal(ctx context.Context, req *connect.Request[envdpb.SendSignalRequest]) (*connect.Response[envdpb.SendSignalResponse], error) {
	sc := scopeOf(ctx)
	sig := int(req.Msg.GetSignal())
	if sig != 9 && sig != 15 {
		return nil, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("signal %d: only SIGKILL and SIGTERM", sig))
	}
	pid, err := p.selected(sc, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if ps := p.pty(sc.id, pid); ps != nil {
		// Ending the session kills the terminal's process and its group.
		ps.t.Close()
		<-ps.done
		return connect.NewResponse(&envdpb.SendSignalResponse{}), nil
	}
	proc, err := p.find(ctx, sc, pid)
	if err != nil {
		return nil, err
	}
	if !proc.Running {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", pid))
	}
	if err := sc.c.Signal(ctx, sc.id, proc.ID, sig); err != nil {
		return nil, rpcErr(ctx, sc, err)
	}
	if sig == 9 {
		// Reaped before the answer: `kill -0 PID` fails from here on.
		if _, err := sc.c.Wait(ctx, sc.id, proc.ID); err != nil {
			return nil, rpcErr(ctx, sc, err)
		}
	}
	return connect.NewResponse(&envdpb.SendSignalResponse{}), nil
}

func (p *processSvc) Update(ctx context.Context, req *connect.Request[envdpb.UpdateRequest]) (*connect.Response[envdpb.UpdateResponse], error) {
	sc := scopeOf(ctx)
	pid, err := p.selected(sc, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	ps := p.pty(sc.id, pid)
	if ps == nil {
		if _, err := p.find(ctx, sc, pid); err != nil {
			return nil, err
		}
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("process %d has no terminal", pid))
	}
	if size := req.Msg.GetPty().GetSize(); size != nil {
		if err := ps.t.Resize(ctx, uint16(size.GetRows()), uint16(size.GetCols())); err != nil {
			return nil, connect.NewError(connect.CodeInternal, err)
		}
	}
	return connect.NewResponse(&envdpb.UpdateResponse{}), nil
}
