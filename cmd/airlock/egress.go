package main

import (
	"fmt"
	"log/slog"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// runEgress is the egress proxy of one `airlock run` sandbox.
type runEgress struct{}

func (e *runEgress) summary() []string { return nil }

// setupEgress starts the egress proxy for spec when its policy allows any
// network, and adds its environment and files to spec.
func setupEgress(spec *sandbox.Spec, sink audit.Sink, log *slog.Logger) (*runEgress, error) {
	if spec.Policy.Network.Mode == "" || spec.Policy.Network.Mode == policy.NetworkNone {
		return nil, nil
	}
	return nil, fmt.Errorf("network mode %q: egress proxy: %w", spec.Policy.Network.Mode, sandbox.ErrUnavailable)
}
