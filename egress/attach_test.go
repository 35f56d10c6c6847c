package egress

import (
	"testing"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// attach is what the CLI does: a proxy only when the policy needs one.
func attach(spec *sandbox.Spec) (*Proxy, error) {
	if !Needed(spec.Policy) {
		return nil, nil
	}
	p, err := New(Config{SandboxID: spec.ID, Network: spec.Policy.Network, Secrets: spec.Policy.Secrets})
	if err != nil {
		return nil, err
	}
	p.Attach(spec, nil)
	return p, nil
}

func TestAttach(t *testing.T) {
	spec := &sandbox.Spec{ID: "sb-a", Policy: &policy.Policy{Network: policy.Network{Mode: policy.NetworkNone}}}
	if p, err := attach(spec); p != nil || err != nil || spec.Egress != nil {
		t.Fatalf("mode none: %v %v", p, err)
	}
	spec = &sandbox.Spec{ID: "sb-b", Policy: &policy.Policy{Network: allowlist("api.test")}, Env: map[string]string{"KEEP": "1"}}
	p, err := attach(spec)
	if err != nil || p == nil || spec.Egress != p {
		t.Fatalf("allowlist: %v %v", p, err)
	}
	if spec.Env["KEEP"] != "1" || spec.Env["HTTPS_PROXY"] == "" || spec.Env["SSL_CERT_FILE"] != CAPath || len(spec.Files) != 2 {
		t.Fatalf("spec env %v files %d", spec.Env, len(spec.Files))
	}
	spec = &sandbox.Spec{ID: "sb-c", Policy: &policy.Policy{Network: policy.Network{Mode: "bogus"}}}
	if _, err := attach(spec); err == nil || spec.Egress != nil || spec.Env != nil {
		t.Fatalf("bad policy: %v, spec changed: %+v", err, spec)
	}
}
