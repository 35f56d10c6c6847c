// Package kubernetes is Airlock's backend for a Kubernetes cluster: each
// sandbox is an agent-sandbox Sandbox (agents.x-k8s.io), or a SandboxClaim
// against a SandboxWarmPool, whose one container runs the node's airlock
// binary (a read-only hostPath) as `airlock agent serve` under the
// `airlock` RuntimeClass. The host reaches the agent over the pod's attach
// stream (stdin and stdout, stdinOnce), so exec, files, PTYs and egress
// ride the same agent protocol as on every backend, and closing the
// stream ends the sandbox.
//
// It talks to the API server through controller-runtime's client and
// client-go only. It must never widen the policy it is given: whatever a
// policy asks that a pod cannot honour (host paths, caches, a root
// directory) is refused with ErrInvalid, and Create leaves no Sandbox,
// claim, Secret or pod behind when it fails.
package kubernetes
