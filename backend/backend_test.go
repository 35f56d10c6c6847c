package backend

import (
	"slices"
	"testing"

	"github.com/airlock-dev/airlock/policy"
)

// A policy accepts exactly the backends this build can open (and auto).
func TestPolicyKnowsEveryBackend(t *testing.T) {
	want := append(append([]string{"auto"}, Names()...), Remote()...)
	got := append([]string(nil), policy.Backends...)
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("policy.Backends %v, backend.Names plus auto %v", got, want)
	}
}
