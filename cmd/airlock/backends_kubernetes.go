//go:build kubernetes

package main

// The airlock-kube build (go build -tags kubernetes): airlock plus the
// Kubernetes backend and its client libraries, which the default build,
// every sandbox's init and agent, never links.
import _ "github.com/airlock-dev/airlock/backend/kubernetes"
