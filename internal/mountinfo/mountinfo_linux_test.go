package mountinfo

import "testing"

func TestSelf(t *testing.T) {
	ms, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	root := false
	for _, m := range ms {
		root = root || m.Point == "/"
	}
	if !root {
		t.Errorf("/proc/self/mountinfo has no / mount: %+v", ms)
	}
}
