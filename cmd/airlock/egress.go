package main

import (
	"fmt"
	"log/slog"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/egress"
	"github.com/airlock-dev/airlock/sandbox"
)

// setupEgress starts the egress proxy for spec when its policy allows any
// network or carries secrets, and attaches it to spec; nil when the sandbox
// gets no network at all.
func setupEgress(spec *sandbox.Spec, sink audit.Sink, log *slog.Logger) (*egress.Proxy, error) {
	if !egress.Needed(spec.Policy) {
		return nil, nil
	}
	pol := spec.Policy
	p, err := egress.New(egress.Config{SandboxID: spec.ID, Network: pol.Network, Secrets: pol.Secrets, Audit: sink, Log: log})
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	bundle, err := egress.SystemBundle()
	if err != nil {
		// The sandbox then trusts only its own CA: TLS to hosts the proxy
		// does not intercept fails inside, which is visible, not weaker.
		log.Warn("no system CA bundle on this host; the sandbox trusts only its egress CA", "err", err)
	}
	p.Attach(spec, bundle)
	return p, nil
}
