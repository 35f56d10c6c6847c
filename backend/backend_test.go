package backend_test

import (
	"slices"
	"testing"

	"github.com/airlock-dev/airlock/backend"
	_ "github.com/airlock-dev/airlock/backend/builtin"
	_ "github.com/airlock-dev/airlock/backend/kubernetes"
	"github.com/airlock-dev/airlock/policy"
)

// A policy accepts exactly the backends the builds can open (and auto).
func TestPolicyKnowsEveryBackend(t *testing.T) {
	want := append(append([]string{"auto"}, backend.Names()...), backend.Remote()...)
	got := append([]string(nil), policy.Backends...)
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("policy.Backends %v, backend.Names plus auto %v", got, want)
	}
}

// The local backends come in start-up order, the order auto tries them.
func TestNamesInStartupOrder(t *testing.T) {
	want := []string{"native", "gvisor", "docker", "wasm", "microvm"}
	if got := backend.Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	if got := backend.Remote(); !slices.Equal(got, []string{"kubernetes"}) {
		t.Fatalf("Remote() = %v, want [kubernetes]", got)
	}
}
