package agent

import (
	"runtime"
	"sync"
)

// spawner is the one OS thread that forks every process the agent starts.
// Per-thread state (the capability bounding set is one) is inherited by a
// child from the thread that forked it, so a backend can set such state once
// on this thread (PrepareSpawnThread) instead of on every thread
// of the process with stop-the-world AllThreadsSyscall calls.
var spawner struct {
	once sync.Once
	err  error
	reqs chan func()
}

// PrepareSpawnThread starts the thread that will fork every process the
// agent starts and runs setup on it first. Per-thread state that setup sets
// (e.g. the capability bounding set, which needs CAP_SETPCAP, so call this
// before dropping capabilities) is inherited by every process. Call it at
// most once, before Serve; an error is returned by Serve too (fail closed).
func PrepareSpawnThread(setup func() error) error { return startSpawner(setup) }

// startSpawner starts the spawn thread and runs setup on it first; its
// error is returned now and by every later call (fail closed).
func startSpawner(setup func() error) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan func())
		ready := make(chan error)
		go func() {
			// Never unlocked: the thread carries setup's changes and exits
			// with the goroutine, never returning to the scheduler's pool.
			runtime.LockOSThread()
			var err error
			if setup != nil {
				err = setup()
			}
			ready <- err
			if err != nil {
				return
			}
			for f := range spawner.reqs {
				f()
			}
		}()
		spawner.err = <-ready
	})
	return spawner.err
}

// onSpawnThread runs f on the spawn thread and waits for it.
func onSpawnThread(f func()) error {
	if err := startSpawner(nil); err != nil {
		return err
	}
	done := make(chan struct{})
	spawner.reqs <- func() { f(); close(done) }
	<-done
	return nil
}
