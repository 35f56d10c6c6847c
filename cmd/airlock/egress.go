package main

import (
	"fmt"
	"log/slog"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/egress"
	"github.com/airlock-dev/airlock/sandbox"
)

// runEgress is the egress proxy of one `airlock run` sandbox.
type runEgress struct{ p *egress.Proxy }

// summary is the egress part of the --json result.
func (e *runEgress) summary() *egress.Stats {
	s := e.p.Stats()
	return &s
}

// setupEgress starts the egress proxy for spec when its policy allows any
// network or carries secrets, and adds its environment and files to spec.
func setupEgress(spec *sandbox.Spec, sink audit.Sink, log *slog.Logger) (*runEgress, error) {
	p, err := egress.Attach(spec, sink, log)
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	if p == nil {
		return nil, nil
	}
	return &runEgress{p: p}, nil
}
