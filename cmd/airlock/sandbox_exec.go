package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/sandbox"
)

// sbExec runs a command; its exit status becomes ours. -t gives a PTY
// (raw terminal), -i streams our stdin. SIGINT or SIGTERM end the command
// (its whole group, on the server) and exit 128+signal.
func sbExec(ctx context.Context, c *client.Client, args []string) int {
	fs := sbFlags("exec")
	interactive := fs.Bool("i", false, "stream stdin to the command")
	tty := fs.Bool("t", false, "run on a terminal (PTY)")
	workdir := fs.String("workdir", "", "working directory inside")
	user := fs.String("user", "", "run as `USER[:GROUP]` (names from the sandbox's /etc/passwd, or uid:gid)")
	timeout := fs.Duration("timeout", 0, "wall-time limit")
	var env stringList
	fs.Var(&env, "env", "environment K=V (repeatable)")
	// Allow "-it" as docker does.
	for i, a := range args {
		if a == "--" {
			break
		}
		if a == "-it" || a == "-ti" {
			args = append(append(append([]string{}, args[:i]...), "-i", "-t"), args[i+1:]...)
			break
		}
	}
	if err := fs.Parse(args); err != nil {
		return exitAirlock
	}
	rest := fs.Args()
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	}
	if len(rest) < 2 {
		return fail("sandbox exec", fmt.Errorf("want ID -- CMD [ARGS]: %w", errdefs.ErrInvalid))
	}
	id, cmd := rest[0], rest[1:]
	if len(cmd) > 0 && cmd[0] == "--" {
		cmd = cmd[1:]
	}
	envm, err := keyValues(env, "--env")
	if err != nil {
		return fail("sandbox exec", err)
	}
	var ex api.ExitStatus
	if *tty && *user != "" {
		return fail("sandbox exec", fmt.Errorf("--user with -t: a terminal runs as the sandbox's user: %w", sandbox.ErrNotSupported))
	}
	if *tty {
		ex, err = sbExecTTY(ctx, c, id, client.PTYOptions{Args: cmd, Env: envm, Dir: *workdir, Timeout: *timeout})
	} else {
		o := client.ExecOptions{Args: cmd, Env: envm, Dir: *workdir, Timeout: *timeout, User: *user, Stdout: os.Stdout, Stderr: os.Stderr}
		if *interactive {
			o.Stdin = os.Stdin
		}
		ex, err = c.Exec(ctx, id, o)
	}
	if code, ok := interruptCode(ctx); ok {
		fmt.Fprintf(os.Stderr, "airlock sandbox exec: %v: the command was killed\n", context.Cause(ctx))
		return code
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "airlock sandbox exec: %v\n", err)
		return execExitCode(err)
	}
	reportEnd("sandbox exec", ex)
	return ex.Code
}

// reportEnd says why a command ended when it did not end by itself: its
// exit code alone (137) does not tell a timeout or the memory limit from
// a kill.
func reportEnd(cmd string, ex api.ExitStatus) {
	switch {
	case ex.TimedOut:
		fmt.Fprintf(os.Stderr, "airlock %s: command killed at its wall-clock timeout (exit %d)\n", cmd, ex.Code)
	case ex.OOM:
		fmt.Fprintf(os.Stderr, "airlock %s: command killed by the sandbox's memory limit (exit %d)\n", cmd, ex.Code)
	}
	if ex.Truncated {
		fmt.Fprintf(os.Stderr, "airlock %s: output cut at the output limit\n", cmd)
	}
}

// sbExecTTY runs o on a terminal: ours in raw mode when stdin is one, else
// our stdin as its input, with end of file passed on (^D) when it ends.
func sbExecTTY(ctx context.Context, c *client.Client, id string, o client.PTYOptions) (api.ExitStatus, error) {
	var probe sandbox.ExecRequest
	term, err := attachTerminal(&probe)
	if err != nil {
		return api.ExitStatus{}, err
	}
	defer term.restore()
	o.Rows, o.Cols = probe.Rows, probe.Cols
	if o.Rows == 0 {
		o.Rows, o.Cols = 24, 80
	}
	p, err := c.PTY(ctx, id, o)
	if err != nil {
		return api.ExitStatus{}, err
	}
	defer p.Close()
	go func() {
		if _, err := io.Copy(p, os.Stdin); err == nil {
			p.CloseWrite() // stdin ended (a pipe or file): the command reads EOF
		}
	}()
	go func() {
		for range term.resized() {
			r, c := term.size()
			p.Resize(ctx, r, c)
		}
	}()
	io.Copy(os.Stdout, p)
	ex, err := p.Wait(context.Background())
	term.restore()
	return ex, err
}

// interrupted is the cause of a context that SIGINT or SIGTERM ended.
type interrupted struct{ sig os.Signal }

func (e interrupted) Error() string { return "interrupted by " + e.sig.String() }

// interruptCode is the exit code for a context a signal ended: 128+signal.
func interruptCode(ctx context.Context) (int, bool) {
	var ie interrupted
	if !errors.As(context.Cause(ctx), &ie) {
		return 0, false
	}
	if s, ok := ie.sig.(syscall.Signal); ok {
		return 128 + int(s), true
	}
	return 130, true
}
