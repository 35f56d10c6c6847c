//go:build !linux

// Command cluster keeps a test cluster up for manual work (Linux only).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "cluster: the test cluster runs on Linux only")
	os.Exit(125)
}
