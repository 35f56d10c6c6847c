package egress

import (
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// Needed reports whether a sandbox with policy pol needs an egress proxy:
// a network mode other than none, or secrets to inject.
func Needed(pol *policy.Policy) bool {
	return (pol.Network.Mode != "" && pol.Network.Mode != policy.NetworkNone) || len(pol.Secrets) > 0
}

// Attach makes p spec's egress handler and adds the proxy's environment and
// CA files to spec; bundle is the system roots the sandbox keeps trusting
// besides its own CA (nil: only the sandbox CA). The CLI and the server
// both give sandboxes their proxy this way.
func (p *Proxy) Attach(spec *sandbox.Spec, bundle []byte) {
	spec.Egress = p
	if spec.Env == nil {
		spec.Env = map[string]string{}
	}
	for k, v := range p.SandboxEnv() {
		spec.Env[k] = v
	}
	spec.Files = append(spec.Files, p.SandboxFiles(bundle)...)
}
