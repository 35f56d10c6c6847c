package agent

import (
	"errors"
	"testing"
)

// What a hostile guest could send in a watch frame is refused as a
// protocol violation (which ends the session).
func TestCheckEvent(t *testing.T) {
	for _, c := range []struct {
		e  wireEvent
		ok bool
	}{
		{wireEvent{Op: "create", Path: "/w/a"}, true},
		{wireEvent{Op: "write", Path: "/w/a"}, true},
		{wireEvent{Op: "remove", Path: "/w/d", Dir: true}, true},
		{wireEvent{Op: "rename", Path: "/w/b", From: "/w/a"}, true},
		{wireEvent{Op: "overflow"}, true},
		{wireEvent{Op: "overflow", Path: "/x"}, false},
		{wireEvent{Op: "create", Path: "relative"}, false},
		{wireEvent{Op: "create", Path: "/w/../etc"}, false},
		{wireEvent{Op: "create", Path: "/w/a\x00b"}, false},
		{wireEvent{Op: "create", Path: ""}, false},
		{wireEvent{Op: "write", Path: "/w/a", From: "/w/b"}, false},
		{wireEvent{Op: "rename", Path: "/w/b"}, false},
		{wireEvent{Op: "chmod", Path: "/w/a"}, false},
	} {
		err := checkEvent(&c.e)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, errProtocol)) {
			t.Errorf("%+v: %v, want ok=%v", c.e, err, c.ok)
		}
	}
}
