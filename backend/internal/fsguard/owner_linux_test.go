package fsguard

import "testing"

func TestRangeOwns(t *testing.T) {
	r := &Range{UID: 100000, GID: 200000, Count: 65536}
	for _, c := range []struct {
		uid, gid uint32
		want     bool
	}{
		{100000, 200000, true},
		{165535, 265535, true},
		{165536, 200000, false}, // uid past the range
		{100000, 199999, false}, // gid before it
		{0, 0, false},           // host root
		{1000, 200000, false},
	} {
		if got := r.owns(c.uid, c.gid); got != c.want {
			t.Errorf("owns(%d, %d) = %v", c.uid, c.gid, got)
		}
	}
	var none *Range
	if none.owns(100000, 200000) {
		t.Error("nil range owns a file")
	}
}
