package egress

import (
	"testing"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

func TestAttach(t *testing.T) {
	spec := &sandbox.Spec{ID: "sb-a", Policy: &policy.Policy{Network: policy.Network{Mode: policy.NetworkNone}}}
	if p, err := Attach(spec, nil, nil); p != nil || err != nil || spec.Egress != nil {
		t.Fatalf("mode none: %v %v", p, err)
	}
	spec = &sandbox.Spec{ID: "sb-b", Policy: &policy.Policy{Network: allowlist("api.test")}, Env: map[string]string{"KEEP": "1"}}
	p, err := Attach(spec, nil, nil)
	if err != nil || p == nil || spec.Egress != p {
		t.Fatalf("allowlist: %v %v", p, err)
	}
	if spec.Env["KEEP"] != "1" || spec.Env["HTTPS_PROXY"] == "" || spec.Env["SSL_CERT_FILE"] != CAPath || len(spec.Files) != 2 {
		t.Fatalf("spec env %v files %d", spec.Env, len(spec.Files))
	}
	spec = &sandbox.Spec{ID: "sb-c", Policy: &policy.Policy{Network: policy.Network{Mode: "bogus"}}}
	if _, err := Attach(spec, nil, nil); err == nil || spec.Egress != nil || spec.Env != nil {
		t.Fatalf("bad policy: %v, spec changed: %+v", err, spec)
	}
}
