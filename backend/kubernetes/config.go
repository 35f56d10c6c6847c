package kubernetes

import (
	"log/slog"
	"time"
)

// Name is the policy name of this backend.
const Name = "kubernetes"

// AgentPath is where the node's airlock binary appears inside each pod.
const AgentPath = "/.airlock/airlock"

// ContainerName is the name of the pod's one container, the agent.
const ContainerName = "agent"

// Labels every object of this backend carries (Sandbox, claim, Secret,
// and through the pod template the pod). agent-sandbox passes a claim's
// pod labels on only with a domain prefix.
const (
	LabelSandbox = "airlock.dev/sandbox" // the sandbox ID
	LabelOwner   = "airlock.dev/owner"   // Config.Owner: whose Cleanup may remove it
	LabelBackend = "airlock.dev/backend" // "kubernetes"
)

// Defaults of Config.
const (
	DefaultRuntimeClass = "airlock"
	DefaultNodeAgent    = "/usr/local/bin/airlock"
	DefaultImage        = "debian:bookworm-slim"
	DefaultReadyTimeout = 2 * time.Minute
)

// Config configures the Kubernetes backend.
type Config struct {
	// Kubeconfig is the kubeconfig file. Empty: $KUBECONFIG, else
	// ~/.kube/config, else the in-cluster service account.
	Kubeconfig string
	// Namespace holds the sandboxes. Empty: the kubeconfig context's,
	// else "default".
	Namespace string
	// RuntimeClass every pod runs under. Empty: "airlock".
	RuntimeClass string
	// Image is what a sandbox naming no image runs. Empty: debian:bookworm-slim.
	Image string
	// NodeAgent is the airlock binary's path on the nodes (they have it:
	// it is the runtime handler), mounted read-only as the container's
	// command. Empty: /usr/local/bin/airlock.
	NodeAgent string
	// WarmPool, when set, names a SandboxWarmPool: Create claims a pod of
	// it (SandboxClaim) instead of making a Sandbox.
	WarmPool string
	// Owner is written on every object (LabelOwner); Cleanup removes only
	// its own owner's. Empty: "airlock".
	Owner string
	// ReadyTimeout bounds the wait for a pod to be ready. Zero: 2 minutes.
	ReadyTimeout time.Duration
	// Log is the backend's logger; nil discards.
	Log *slog.Logger
}
