package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/airlock-dev/airlock/agent"
)

func init() {
	register(command{name: "agent", short: "in-sandbox agent (internal)", hidden: true, run: runAgent})
}

// runAgent is `airlock agent serve`: the in-sandbox agent speaking the
// protocol over its stdin/stdout. It exits when the host closes the stream.
// Nothing but the protocol is ever written to stdout; logs go to stderr.
func runAgent(args []string) int {
	if len(args) != 1 || args[0] != "serve" {
		fmt.Fprintln(os.Stderr, "usage: airlock agent serve")
		return exitUsageHidden
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
