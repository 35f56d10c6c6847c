package native

import (
	"os/exec"
	"runtime"
	"sync"
)

// Inits are started from one OS thread that never exits: the kernel sends
// an init's parent-death signal (Pdeathsig) when the *thread* that forked
// it exits, and threads the Go runtime hands to a goroutine that locks
// and leaves (the write mediator's) do exit — which would kill other
// sandboxes' inits.
var (
	spawnOnce sync.Once
	spawnReqs chan spawnReq
)

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

// startProcess starts cmd on the spawner thread.
func startProcess(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnReqs = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread lives as long as the process
			for r := range spawnReqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawnReqs <- spawnReq{cmd, done}
	return <-done
}
