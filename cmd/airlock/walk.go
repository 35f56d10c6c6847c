package main

import (
	"fmt"
	"os"

	"github.com/airlock-dev/airlock/internal/writeback"
)

func init() {
	register(command{name: "__walk", short: "list a tree for write-back (internal, runs inside a sandbox)", hidden: true, run: runWalk})
}

// runWalk lists a directory tree as JSON lines: a sandbox whose writes to a
// host path sit in an overlay shows the host what changed (the host trusts
// none of it: it decides every write itself).
func runWalk(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: airlock __walk DIR")
		return exitUsageHidden
	}
	if err := writeback.Walk(args[0], os.Stdout); err != nil {
		return fail("walk", err)
	}
	return 0
}
