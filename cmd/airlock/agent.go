package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"syscall"

	"github.com/airlock-dev/airlock/agent"
)

func init() {
	register(command{name: "agent", short: "in-sandbox agent (internal)", hidden: true, run: runAgent})
}

// runAgent is `airlock agent serve`: the in-sandbox agent speaking the
// protocol over its stdin/stdout. It exits when the host closes the stream.
// Nothing but the protocol is ever written to stdout; logs go to stderr.
func runAgent(args []string) int {
	private := len(args) == 2 && args[1] == agent.EnvironPrivateFlag
	if len(args) < 1 || args[0] != "serve" || len(args) > 2 || (len(args) == 2 && !private) {
		fmt.Fprintln(os.Stderr, "usage: airlock agent serve ["+agent.EnvironPrivateFlag+"]")
		return exitUsageHidden
	}
	// A container runtime gives its init an environment (runsc adds HOME),
	// and gVisor before 2023 lets processes read /proc/1/environ. The agent
	// needs none (it trusts only Hello): as pid 1, start again without
	// any, unless its runtime keeps that file from the sandbox's processes
	// (the host says so: a second Go start costs most under gVisor).
	if private {
		os.Clearenv()
	} else if os.Getpid() == 1 && len(os.Environ()) > 0 {
		if exe, err := os.Executable(); err == nil {
			syscall.Exec(exe, os.Args, []string{})
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	conn, err := agent.StdioConn()
	if err != nil {
		return fail("agent serve", err)
	}
	if err := agent.Serve(context.Background(), conn, agent.ServeOptions{Log: log}); err != nil {
		return fail("agent serve", err)
	}
	return 0
}
