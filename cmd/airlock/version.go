package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set by the Makefile with -ldflags "-X main.version=...".
var version = "dev"

func init() {
	register(command{name: "version", short: "print the version", run: runVersion})
}

func runVersion(args []string) int {
	rev := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = " (" + s.Value[:12] + ")"
			}
		}
	}
	fmt.Printf("airlock %s%s %s %s/%s\n", version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}
