package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// newFlagSet returns a flag set that reports errors instead of exiting, so
// that every bad flag becomes exit 125 with a message naming the flag.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("airlock "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses args and prints a clear error; ok is false when the
// command must exit (help requested or bad flags), with the exit code.
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	err := fs.Parse(args)
	if err == nil {
		return 0, true
	}
	if err == flag.ErrHelp {
		fs.SetOutput(nil)
		fmt.Fprintf(fs.Output(), "usage of %s:\n", fs.Name())
		fs.PrintDefaults()
		return 0, false
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", fs.Name(), err)
	return exitAirlock, false
}
