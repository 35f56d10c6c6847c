package main

// The backends every build has (native, gvisor, docker, wasm, microvm);
// the kubernetes build adds its own in backends_kubernetes.go.
import _ "github.com/airlock-dev/airlock/backend/builtin"
