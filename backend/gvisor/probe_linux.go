package gvisor

import (
	"context"
	"strings"

	"github.com/airlock-dev/airlock/sandbox"
)

// Probe reports whether runsc can run sandboxes here: its version, the
// platform it will use and, when not, why and what to install.
func (b *Backend) Probe(ctx context.Context) sandbox.Probe {
	info := b.Info(ctx)
	p := sandbox.Probe{Available: info.Err == nil, Isolation: "medium", Details: map[string]string{}}
	if info.Err != nil {
		p.Reason = info.Err.Error()
	}
	if info.Path != "" {
		p.Details["runsc"] = info.Path
	}
	if info.Version != "" {
		p.Details["runsc_version"] = info.Version
	}
	if len(info.Platforms) > 0 {
		p.Details["runsc_platforms"] = strings.Join(info.Platforms, ",")
	}
	if info.Platform != "" {
		p.Details["platform"] = info.Platform
	}
	if info.KVM != "" {
		p.Details["kvm_platform"] = info.KVM
	}
	p.Details["state_dir"] = b.cfg.StateDir
	return p
}
