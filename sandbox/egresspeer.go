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

// ProgramRules is implemented by an EgressHandler whose rules may name
// programs. Naming the program behind a connection costs the agent inside
// a walk of the sandbox's /proc for every connection, so an agent does it
// only while some rule in force names programs; its host side learns when
// from this.
type ProgramRules interface {
	// WatchPrograms returns whether a rule in force names programs now,
	// and from then on calls fn with the new answer whenever a policy
	// change turns it over: before the change takes effect when rules
	// come to name programs, after it when they stop, and the change
	// returns only once fn has returned. So a connection made after a
	// change returns is identified when (and only when) its rules need
	// it, provided fn has told the agent. Calls are serialised, with each
	// other and with policy changes; fn must not call back into the
	// handler. stop ends the calls (idempotent; once it returns, fn is
	// not running and will not be called).
	WatchPrograms(fn func(names bool)) (now bool, stop func())
}
