package rootcaps

import (
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/policy"
)

// The numbers written out here are the kernel's.
func TestSetIsTheKernels(t *testing.T) {
	want := []int{unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FOWNER, unix.CAP_FSETID, unix.CAP_KILL,
		unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_SETPCAP, unix.CAP_NET_BIND_SERVICE, unix.CAP_SETFCAP}
	if !slices.Equal(Set, want) {
		t.Errorf("Set = %v, want %v", Set, want)
	}
	if n := Names(); len(n) != len(Set) || n[0] != "CAP_CHOWN" || n[len(n)-1] != "CAP_SETFCAP" || slices.Contains(n, "") {
		t.Errorf("Names = %q", n)
	}
}

func TestKeep(t *testing.T) {
	p, none := &policy.Policy{}, &policy.Policy{}
	none.Process.Capabilities = policy.CapabilitiesNone
	for _, c := range []struct {
		image, ranged bool
		uid           int
		pol           *policy.Policy
		want          bool
	}{
		{true, true, 0, p, true},
		{false, true, 0, p, false},
		{true, false, 0, p, false},
		{true, true, 1000, p, false},
		{true, true, 0, none, false},
	} {
		if got := Keep(c.image, c.ranged, c.uid, c.pol); got != c.want {
			t.Errorf("Keep(%v, %v, %d, %q) = %v", c.image, c.ranged, c.uid, c.pol.Process.Capabilities, got)
		}
	}
}
