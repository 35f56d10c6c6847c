package egress

import (
	"log/slog"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// Attach gives spec its egress proxy when its policy needs one (a network
// mode other than none, or secrets), adding the proxy's environment and CA
// files to spec. It returns nil when the sandbox gets no network at all.
// The CLI and the server both attach egress this way.
func Attach(spec *sandbox.Spec, sink audit.Sink, log *slog.Logger) (*Proxy, error) {
	pol := spec.Policy
	if (pol.Network.Mode == "" || pol.Network.Mode == policy.NetworkNone) && len(pol.Secrets) == 0 {
		return nil, nil
	}
	p, err := New(Config{SandboxID: spec.ID, Network: pol.Network, Secrets: pol.Secrets, Audit: sink, Log: log})
	if err != nil {
		return nil, err
	}
	bundle, err := SystemBundle()
	if err != nil {
		// No system roots on this host: the sandbox still trusts its own CA.
		bundle = nil
	}
	spec.Egress = p
	if spec.Env == nil {
		spec.Env = map[string]string{}
	}
	for k, v := range p.SandboxEnv() {
		spec.Env[k] = v
	}
	spec.Files = append(spec.Files, p.SandboxFiles(bundle)...)
	return p, nil
}
