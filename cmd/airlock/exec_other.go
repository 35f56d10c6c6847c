//go:build !unix

package main

import (
	"os"
	"os/exec"
)

// execInPlace runs path to its end and exits with its status (there is no
// exec(2) here); it returns only when path cannot be started.
func execInPlace(path string, argv []string) error {
	c := exec.Command(path, argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := c.Start(); err != nil {
		return err
	}
	c.Wait()
	os.Exit(c.ProcessState.ExitCode())
	return nil
}
