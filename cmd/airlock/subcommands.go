package main

import (
	"fmt"
	"io"
	"os"
)

// subcommand is one verb of a command group: `airlock image pull`,
// `airlock sandbox exec`, `airlock serve key create`.
type subcommand struct {
	names []string // the first is its name; the others are aliases (ls, list)
	run   func(args []string) int
}

// dispatch is how every command group reads its verb (args[0]) and runs
// it with the rest: none given prints usage on stderr and exits 125; -h,
// --help or help prints it on stdout and exits 0; an unknown one says so
// and exits 125.
func dispatch(group, usage string, subs []subcommand, args []string) int {
	return dispatchTo(os.Stdout, os.Stderr, group, usage, subs, args)
}

func dispatchTo(stdout, stderr io.Writer, group, usage string, subs []subcommand, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitAirlock
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	for _, s := range subs {
		for _, n := range s.names {
			if n == args[0] {
				return s.run(args[1:])
			}
		}
	}
	fmt.Fprintf(stderr, "airlock %s: unknown command %q\n%s", group, args[0], usage)
	return exitAirlock
}
