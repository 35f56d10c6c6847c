package egress

import (
	"testing"

	"github.com/airlock-dev/airlock/policy"
)

// ruleAgrees checks that an entry the policy validator accepts means the
// same to the proxy: validation and enforcement must not disagree.
func ruleAgrees(t *testing.T, s string) {
	e, err := policy.ParseNetworkEntry(s)
	if err != nil {
		return
	}
	r, err := ParseRule(s)
	if err != nil {
		t.Fatalf("policy accepts %q, the proxy refuses it: %v", s, err)
	}
	if int(r.Port) != e.Port {
		t.Fatalf("%q: port %d vs policy %d", s, r.Port, e.Port)
	}
	switch r.Kind {
	case RulePrefix:
		if r.Prefix != e.Prefix {
			t.Fatalf("%q: prefix %v vs policy %v", s, r.Prefix, e.Prefix)
		}
	case RuleName, RuleWildcard:
		if r.Name != e.Host || (r.Kind == RuleWildcard) != e.Wildcard {
			t.Fatalf("%q: name %q wildcard %v vs policy %q %v", s, r.Name, r.Kind == RuleWildcard, e.Host, e.Wildcard)
		}
	}
	// The policy's canonical form reads the same.
	r2, err := ParseRule(e.String())
	if err != nil || r2.Kind != r.Kind || r2.Name != r.Name || r2.Prefix != r.Prefix || r2.Port != r.Port {
		t.Fatalf("%q: policy form %q parses as %+v (%v), want %+v", s, e.String(), r2, err, r)
	}
}

var agreeSeeds = []string{
	"example.com", "Example.COM.", "*.example.com", "*.example.com:443", "example.com:8080",
	"10.0.0.0/8", "10.1.2.3/8", "10.0.0.0/8:5432", "192.0.2.1", "192.0.2.1:8080", "[2001:db8::1]:443",
	"2001:db8::1", "2001:db8::/32", "::ffff:10.0.0.0/104", "::1/128:80", "0.0.0.0/0",
	"::ffff:127.0.0.1", "[::ffff:127.0.0.1]:80", "*.com", "*", "2130706433", "127.1", "a..b", "-a.com", "xn--bcher-kva.example", "a_b.example",
}

func TestRuleAgreesWithPolicy(t *testing.T) {
	for _, s := range agreeSeeds {
		ruleAgrees(t, s)
	}
}

func FuzzRuleAgreesWithPolicy(f *testing.F) {
	for _, s := range agreeSeeds {
		f.Add(s)
	}
	f.Fuzz(ruleAgrees)
}
