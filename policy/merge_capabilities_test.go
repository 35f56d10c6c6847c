package policy

import (
	"strings"
	"testing"
)

// A "none" in any layer wins: a later layer never regains capabilities.
func TestMergeCapabilities(t *testing.T) {
	for _, c := range []struct{ base, over, want string }{
		{"", "", ""},
		{"", CapabilitiesNone, CapabilitiesNone},
		{CapabilitiesNone, CapabilitiesDefault, CapabilitiesNone},
		{CapabilitiesDefault, CapabilitiesNone, CapabilitiesNone},
		{CapabilitiesDefault, "", CapabilitiesDefault},
	} {
		b, o := &Policy{}, &Policy{}
		b.Process.Capabilities, o.Process.Capabilities = c.base, c.over
		if got := Merge(b, o).Process.Capabilities; got != c.want {
			t.Errorf("%q over %q: %q, want %q", c.over, c.base, got, c.want)
		}
	}
}

func TestCapabilitiesValidated(t *testing.T) {
	_, err := Parse("p.yaml", []byte("version: 1\nprocess:\n  capabilities: all\n"))
	if err == nil || !strings.Contains(err.Error(), "process.capabilities") {
		t.Errorf("capabilities: all: %v", err)
	}
}
