//go:build unix

package main

import (
	"os"
	"os/signal"
	"syscall"
)

// notifyResize reports window changes (SIGWINCH).
func notifyResize() chan os.Signal {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGWINCH)
	return c
}

func stopResize(c chan os.Signal) {
	if c != nil {
		signal.Stop(c)
	}
}
