package client_test

import (
	"os/exec"
	"testing"
)

// mount mounts the ext4 image img at dir (as the host's root would, to
// change a paused sandbox's files behind the server's back).
func mount(t *testing.T, img, dir string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
		t.Fatalf("mount %s: %v %s", img, err, out)
	}
}

func unmount(t *testing.T, dir string) {
	t.Helper()
	if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
		t.Fatalf("umount %s: %v %s", dir, err, out)
	}
}
