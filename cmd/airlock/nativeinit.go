package main

import (
	"context"
	"io"

	"github.com/airlock-dev/airlock/agent"
	"github.com/airlock-dev/airlock/backend/native"
)

// The native backend's in-namespace init: started by native.Backend.Create
// inside fresh namespaces, it sets the sandbox up and then serves the agent
// protocol on its inherited channel. Hidden: never run it by hand.
func init() {
	register(command{
		name:   native.InitCommand,
		short:  "native sandbox init (internal)",
		hidden: true,
		run: func(args []string) int {
			return native.InitMain(func(ctx context.Context, conn io.ReadWriteCloser) error {
				return agent.Serve(ctx, conn, agent.ServeOptions{})
			})
		},
	})
}
