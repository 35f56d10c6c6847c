package sandbox

import "context"

// EgressPeer is what a backend's agent found out about the process behind
// one tunnelled egress connection. Program is the absolute path of its
// executable, set only when the agent verified it (see docs/egress.md,
// "Per-program rules"); Unverified says why Program is empty. The agent
// runs inside the sandbox, so this is as strong as the agent's isolation
// from the sandbox's other processes, no stronger.
type EgressPeer struct {
	Program    string
	Unverified string
}

type egressPeerKey struct{}

// WithEgressPeer returns ctx carrying p, for an EgressHandler.
func WithEgressPeer(ctx context.Context, p EgressPeer) context.Context {
	return context.WithValue(ctx, egressPeerKey{}, p)
}

// EgressPeerFrom returns the peer ctx carries; without one, Program is
// empty and Unverified says the backend did not identify it.
func EgressPeerFrom(ctx context.Context) EgressPeer {
	if p, ok := ctx.Value(egressPeerKey{}).(EgressPeer); ok {
		return p
	}
	return EgressPeer{Unverified: "the backend does not identify programs"}
}
