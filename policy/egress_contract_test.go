package policy_test

import (
	"testing"

	"github.com/airlock-dev/airlock/egress"
	"github.com/airlock-dev/airlock/policy"
)

// FuzzNetworkEntryEgress holds the contract between the policy validator
// and the egress proxy: every entry a policy accepts, in the canonical form
// Resolve stores, is accepted by the proxy's rule parser, so a policy that
// passes `airlock policy check` never fails when a sandbox starts.
func FuzzNetworkEntryEgress(f *testing.F) {
	for _, s := range []string{
		"example.com", "API.Anthropic.com", "*.example.com:443", "localhost", "my-host.internal:80",
		"10.0.0.0/8:5432", "::ffff:10.0.0.0/104", "::ffff:10.1.2.3", "[::]", "192.0.2.1:8080",
		"2001:db8::1", "[2001:db8::1]:443", "2001:db8::/32", "xn--bcher-kva.example", "a.b.c.d.e.f",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := policy.ParseNetworkEntry(s)
		if err != nil {
			return
		}
		if _, err := egress.ParseRule(e.String()); err != nil {
			t.Fatalf("policy accepts %q (canonical %q) but the egress proxy does not: %v", s, e.String(), err)
		}
	})
}
