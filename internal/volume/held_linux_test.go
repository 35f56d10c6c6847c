package volume

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// TestVolumeCloseWithCopyInAnotherNamespace: a process that took a copy
// of the host's mounts (a new mount namespace made private: what every
// sandbox's init holds for a moment before it detaches the host's root,
// and a VMM jail without a root of its own for the VM's life) keeps the
// volume's filesystem alive after the unmount here succeeds, and the
// kernel then writes nothing back. Close must not report the detach
// before the data is on the image: the data is there (read from the
// image file itself, no mount), the error says the image is still held
// and names the holder, Attach refuses the image until the holder is
// gone and then finds the data (issue 24 item 14).
func TestVolumeCloseWithCopyInAnotherNamespace(t *testing.T) {
	testutil.RequireRoot(t)
	if why := Available(); why != "" {
		testutil.Skip(t, "volumes: "+why)
	}
	testutil.RequireBinary(t, "unshare")
	testutil.RequireBinary(t, "debugfs")
	dir := t.TempDir()
	img, mp := filepath.Join(dir, "v.img"), filepath.Join(dir, "mnt")
	v, err := Create(context.Background(), img, mp, 16<<20, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Remove()
	if err := os.WriteFile(filepath.Join(mp, "keep"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", "echo ready; exec sleep 600")
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { holder.Process.Kill(); holder.Wait() }()
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(out).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = fmt.Errorf("holder printed %q", line)
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("holder not ready within a minute")
	}
	// The holder never lets go by itself: whatever the bound, Detach ends
	// with the image held.
	err = v.Detach(2 * time.Second)
	t.Logf("Detach: %v", err)
	if mounted(t, mp) {
		t.Fatal("still mounted here after Detach")
	}
	if b, derr := exec.Command("debugfs", "-R", "cat /keep", img).Output(); derr != nil || string(b) != "kept" {
		t.Errorf("the image after Detach holds %q (%v), want kept: the detach was reported before the data was on the image", b, derr)
	}
	if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d ", holder.Process.Pid)) {
		t.Errorf("Detach with a copy of the mount in another namespace: %v, want ErrHeld naming pid %d", err, holder.Process.Pid)
	}
	mp2 := filepath.Join(dir, "mnt2")
	if v2, err := Attach(img, mp2); err == nil {
		v2.Close()
		t.Fatal("attach while a copy of the first mount lives: mounted twice")
	}
	holder.Process.Kill()
	holder.Wait()
	if err := WaitFree(img, time.Minute); err != nil {
		t.Fatal(err)
	}
	v2, err := Attach(img, mp2)
	if err != nil {
		t.Fatalf("attach once the holder is gone: %v", err)
	}
	defer v2.Remove()
	if b, err := os.ReadFile(filepath.Join(mp2, "keep")); err != nil || string(b) != "kept" {
		t.Fatalf("after re-attach: %q %v", b, err)
	}
}
