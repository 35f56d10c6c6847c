package main

import (
	"github.com/airlock-dev/airlock/agent"
	"github.com/airlock-dev/airlock/backend/microvm/guest"
)

// The microvm backend's VM init: the kernel starts the airlock binary from
// the initramfs as PID 1 with this command (after `--` on its command
// line). Hidden: never run it by hand.
func init() {
	register(command{
		name:   "__vminit",
		short:  "microVM init (internal, runs as the guest's PID 1)",
		hidden: true,
		run:    func(args []string) int { return guest.Main(agent.Serve) },
	})
}
