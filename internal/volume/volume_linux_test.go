package volume

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/internal/testutil"
)

func mounted(t *testing.T, dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if fs := strings.Fields(l); len(fs) > 4 && fs[4] == dir {
			return true
		}
	}
	return false
}

// TestVolumeBoundsWritesAndSurvivesReattach: writes stop at the image's
// size (ENOSPC, whoever writes); the files are there after the volume is
// unmounted and attached again (a restart); Remove leaves no mount, loop
// device or file.
func TestVolumeBoundsWritesAndSurvivesReattach(t *testing.T) {
	testutil.RequireRoot(t)
	if why := Available(); why != "" {
		testutil.Skip(t, "volumes: "+why)
	}
	dir := t.TempDir()
	img, mp := filepath.Join(dir, "v.img"), filepath.Join(dir, "mnt")
	v, err := Create(context.Background(), img, mp, 16<<20, 12345, 12345)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Remove()
	st, err := os.Stat(mp)
	if err != nil {
		t.Fatal(err)
	}
	if s := st.Sys().(*syscall.Stat_t); s.Uid != 12345 || s.Gid != 12345 {
		t.Fatalf("root owned by %d:%d", s.Uid, s.Gid)
	}
	if ents, _ := os.ReadDir(mp); len(ents) != 0 {
		t.Fatalf("a fresh volume holds %v", ents)
	}
	f, err := os.Create(filepath.Join(mp, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	var n int64
	for i := 0; i < 64; i++ {
		w, err := f.Write(buf)
		n += int64(w)
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("write: %v", err)
			}
			break
		}
	}
	f.Close()
	if n >= 16<<20 || n == 0 {
		t.Fatalf("wrote %d bytes into a 16 MiB volume", n)
	}
	fi, _ := os.Stat(img)
	if used := fi.Sys().(*syscall.Stat_t).Blocks * 512; used > 20<<20 {
		t.Fatalf("image uses %d bytes of the host's disk", used)
	}
	// Room again (the volume is full), then a file that must survive.
	if err := os.Remove(filepath.Join(mp, "fill")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mp, "keep"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if mounted(t, mp) {
		t.Fatal("still mounted after Close")
	}
	v2, err := Attach(img, mp)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(mp, "keep")); err != nil || string(b) != "kept" {
		t.Fatalf("after re-attach: %q %v", b, err)
	}
	if err := v2.Remove(); err != nil {
		t.Fatal(err)
	}
	if mounted(t, mp) {
		t.Fatal("still mounted after Remove")
	}
	if _, err := os.Stat(img); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("image left: %v", err)
	}
}

func TestSweepUnmountsOnlyBelowRoot(t *testing.T) {
	testutil.RequireRoot(t)
	if why := Available(); why != "" {
		testutil.Skip(t, "volumes: "+why)
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	other := filepath.Join(dir, "other")
	a, err := Create(context.Background(), filepath.Join(dir, "a.img"), filepath.Join(root, "a"), 16<<20, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Remove()
	b, err := Create(context.Background(), filepath.Join(dir, "b.img"), other, 16<<20, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove()
	if err := Sweep(root); err != nil {
		t.Fatal(err)
	}
	if mounted(t, filepath.Join(root, "a")) || !mounted(t, other) {
		t.Fatal("sweep unmounted the wrong volumes")
	}
}

func BenchmarkCreateRemove(b *testing.B) {
	if os.Geteuid() != 0 || Available() != "" {
		b.Skip("needs root and mkfs.ext4")
	}
	dir := b.TempDir()
	for i := 0; i < b.N; i++ {
		v, err := Create(context.Background(), filepath.Join(dir, "v.img"), filepath.Join(dir, "m"), 1<<30, 0, 0)
		if err != nil {
			b.Fatal(err)
		}
		if err := v.Remove(); err != nil {
			b.Fatal(err)
		}
	}
}

// A detach whose mount is busy on purpose (a process with its cwd inside)
// has put the data on the image, and the image is not mounted a second
// time while the first mount lives: Attach refuses clearly; once the
// holder is gone it mounts, data present (issue 24 item 14).
func TestVolumeBusyDetachNeverMountedTwice(t *testing.T) {
	testutil.RequireRoot(t)
	if why := Available(); why != "" {
		testutil.Skip(t, "volumes: "+why)
	}
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
	holder := exec.Command("sleep", "600")
	holder.Dir = mp
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { holder.Process.Kill(); holder.Wait() }()
	// The holder never lets go by itself: the detach ends with the image
	// held, said so, whatever the bound.
	if err := v.Detach(2 * time.Second); !errors.Is(err, ErrHeld) {
		t.Fatalf("detach of a busy volume: %v, want ErrHeld", err)
	}
	// The data reached the image: a read-only look at the image itself
	// (debugfs, no mount) finds the file.
	if out, err := exec.Command("debugfs", "-R", "cat /keep", img).Output(); err == nil && string(out) != "kept" {
		t.Errorf("the image after a busy detach holds %q, want kept", out)
	}
	mp2 := filepath.Join(dir, "mnt2")
	if v2, err := Attach(img, mp2); err == nil || !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "earlier mount") {
		if v2 != nil {
			v2.Close()
		}
		t.Fatalf("attach while the first mount lives: %v, want a refusal naming the earlier mount", err)
	}
	holder.Process.Kill()
	holder.Wait()
	if err := WaitFree(img, 30*time.Second); err != nil {
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
