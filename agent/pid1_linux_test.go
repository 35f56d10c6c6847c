package agent

import (
	"os"
	"os/exec"
	"time"
)

// naiveInit is a Go program as PID 1 without the agent's protections: it
// starts a child that sends it SIGTERM, then waits. The Go runtime exits on
// SIGTERM (status 2), so the attack works on it.
func naiveInit() int {
	cmd := exec.Command("/bin/sh", "-c", "kill -TERM 1")
	if err := cmd.Run(); err != nil {
		return 3
	}
	time.Sleep(5 * time.Second)
	return 0 // survived
}

var _ = os.Getpid
