// Package builtin links the backends every airlock binary has: native,
// gVisor, Docker, WebAssembly and microVMs. Importing it registers them
// with package backend. It must never import an orchestrator's backend
// (Kubernetes): those are linked only by builds that ask for them, since
// this binary is also every sandbox's init and agent.
package builtin

import (
	// Each registers itself with package backend.
	_ "github.com/airlock-dev/airlock/backend/docker"
	_ "github.com/airlock-dev/airlock/backend/gvisor"
	_ "github.com/airlock-dev/airlock/backend/microvm"
	_ "github.com/airlock-dev/airlock/backend/native"
	_ "github.com/airlock-dev/airlock/backend/wasm"
)
