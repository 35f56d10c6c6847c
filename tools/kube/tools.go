//go:build tools

package main

// The agent-sandbox controller is a main package of its own: it is built
// from this module (go build sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller)
// so that it links against the same Kubernetes modules as the components.
import _ "sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller"
