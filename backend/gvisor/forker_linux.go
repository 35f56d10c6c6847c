package gvisor

import (
	"os/exec"
	"runtime"
	"sync"
)

// Pdeathsig is tied to the thread that forked, not to the process: if that
// OS thread ever exits (a goroutine elsewhere in the process locks it and
// returns without unlocking, as namespace code does), runsc would be killed
// with its sandbox. So every runsc run is forked from one thread that is
// locked for the life of the process and never exits.
var (
	forkOnce sync.Once
	forkReq  chan forkCall
)

type forkCall struct {
	cmd  *exec.Cmd
	done chan error
}

// startPinned runs cmd.Start on the pinned thread.
func startPinned(cmd *exec.Cmd) error {
	forkOnce.Do(func() {
		forkReq = make(chan forkCall)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for c := range forkReq {
				c.done <- c.cmd.Start()
			}
		}()
	})
	c := forkCall{cmd: cmd, done: make(chan error, 1)}
	forkReq <- c
	return <-c.done
}
