// Command airlock is the one Airlock binary: run, serve, sandbox, doctor,
// policy, version (`airlock --help` lists what this build has), and the
// hidden in-sandbox agent. It only parses
// flags, wires packages together and maps error kinds to exit codes; the
// work lives in the packages.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/airlock-dev/airlock/errdefs"
)

// Exit codes (Docker's convention).
const (
	exitAirlock     = 125 // airlock itself failed: bad input, backend unavailable
	exitCannotRun   = 126
	exitNotFound    = 127
	exitUsageHidden = 2
)

// command is one subcommand. Each lives in its own file and registers itself
// in init, so subcommands can be added without touching this file.
type command struct {
	name   string
	short  string
	hidden bool
	run    func(args []string) int
}

var commands = map[string]command{}

// argv0Commands run when the binary is invoked under their name (a link
// or copy named airlock-runc is the OCI runtime).
var argv0Commands = map[string]func(args []string) int{}

func register(c command) { commands[c.name] = c }

func main() {
	if run, ok := argv0Commands[filepath.Base(os.Args[0])]; ok {
		os.Exit(run(os.Args[1:]))
	}
	os.Exit(mainArgs(os.Args[1:]))
}

func mainArgs(args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage()
		if len(args) == 0 {
			return exitAirlock
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "airlock: unknown command %q (see airlock --help)\n", args[0])
		return exitAirlock
	}
	return c.run(args[1:])
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: airlock COMMAND [flags] [args]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n, c := range commands {
		if !c.hidden {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", n, commands[n].short)
	}
}

// fail prints err prefixed with the command and returns the exit code for
// its kind. Only the CLI edge maps error kinds to exit codes.
func fail(cmd string, err error) int {
	fmt.Fprintf(os.Stderr, "airlock %s: %v\n", cmd, err)
	return exitCode(err)
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	return exitAirlock
}

// execExitCode maps an error starting the command inside the sandbox to
// Docker's convention by its kind: 127 the command does not exist, 126 it
// cannot be executed, 125 anything else (a missing sandbox or working
// directory is airlock's failure, not the command's).
func execExitCode(err error) int {
	switch {
	case errors.Is(err, errdefs.ErrCommandNotFound):
		return exitNotFound
	case errors.Is(err, errdefs.ErrCannotExecute):
		return exitCannotRun
	default:
		return exitAirlock
	}
}
