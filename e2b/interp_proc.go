package e2b

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/sandbox"
)

// v1Exec starts a code-interpreter kernel (package interp) as a /v1
// background process of sandbox id, acting as c: its stdin streamed to
// the process, its output followed from the server's buffer. So a kernel
// is a process like any other: confined by the sandbox, audited, charged
// to the tenant.
func v1Exec(c *client.Client, id, user string) func(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	return func(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
		p, err := c.StartProcess(context.WithoutCancel(ctx), id, api.ExecRequest{Args: req.Args, Env: req.Env,
			Dir: req.Dir, User: user, StdinStream: true})
		if err != nil {
			return nil, err
		}
		rp := &v1Process{c: c, id: id, p: p, done: make(chan struct{})}
		bg := context.Background()
		if req.Stdin != nil {
			go c.WriteStdin(bg, id, p.ID, req.Stdin, true)
		}
		go func() {
			defer close(rp.done)
			out, errw := req.Stdout, req.Stderr
			if out == nil {
				out = io.Discard
			}
			if errw == nil {
				errw = io.Discard
			}
			ex, err := c.Output(bg, id, p.ID, client.OutputOptions{Follow: true, Stdout: out, Stderr: errw})
			rp.ex = sandbox.ExitStatus{Code: ex.Code, Signal: ex.Signal, TimedOut: ex.TimedOut, OOM: ex.OOM}
			rp.err = err
			// Ended: forget it on the server.
			kctx, cancel := context.WithTimeout(bg, 10*time.Second)
			defer cancel()
			_ = c.Kill(kctx, id, p.ID)
		}()
		return rp, nil
	}
}

// v1Process is a /v1 background process as a sandbox.Process.
type v1Process struct {
	c    *client.Client
	id   string
	p    *api.Process
	done chan struct{}
	ex   sandbox.ExitStatus
	err  error
}

func (p *v1Process) PID() int { return p.p.PID }

func (p *v1Process) Wait(ctx context.Context) (sandbox.ExitStatus, error) {
	select {
	case <-p.done:
		return p.ex, p.err
	case <-ctx.Done():
		return sandbox.ExitStatus{}, ctx.Err()
	}
}

func (p *v1Process) Signal(ctx context.Context, sig int) error {
	return p.c.Signal(ctx, p.id, p.p.ID, sig)
}

func (p *v1Process) Kill(ctx context.Context) error {
	err := p.c.Kill(ctx, p.id, p.p.ID)
	if statusOf(err) == 404 {
		return nil
	}
	return err
}

func (p *v1Process) Resize(context.Context, uint16, uint16) error {
	return errors.New("resize: no terminal")
}

func (p *v1Process) CloseStdin() error { return nil }
