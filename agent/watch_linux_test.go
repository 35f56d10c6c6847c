package agent

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/sandbox"
)

// A watch resolves its path inside the guest's root: a symlink planted
// in the root that points at a host directory cannot make the guest watch
// the host's files (the same link, watched on the host, does).
func TestWatchStaysInRoot(t *testing.T) {
	root, host := t.TempDir(), t.TempDir()
	if err := os.Symlink(host, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	// Unconfined first: inotify on the link's host path follows it.
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, filepath.Join(root, "link"), unix.IN_CREATE); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(host, "secret"), []byte("x"), 0o600)
	buf := make([]byte, 4096)
	if n, err := unix.Read(fd, buf); err != nil || n < unix.SizeofInotifyEvent {
		t.Fatalf("the host watch saw nothing (%d, %v): the attack does not even work unconfined", n, err)
	}

	g := startGuest(t, guestOptions{root: root})
	ctx := testCtx(t)
	if _, err := g.client.Watch(ctx, "/link", false); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("watch through a link to a host directory: %v, want not found", err)
	}
	// What is inside is watched, and its events carry sandbox paths.
	os.Mkdir(filepath.Join(root, "w"), 0o755)
	w, err := g.client.Watch(ctx, "/w", true)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	os.WriteFile(filepath.Join(root, "w", "f"), []byte("x"), 0o600)
	e, err := w.Next()
	if err != nil || e != (sandbox.FileEvent{Op: "create", Path: "/w/f"}) {
		t.Fatalf("%+v %v", e, err)
	}
	// At most MaxWatchStreams at once.
	var ws []sandbox.FileEvents
	defer func() {
		for _, x := range ws {
			x.Close()
		}
	}()
	for i := 1; i < MaxWatchStreams; i++ {
		x, err := g.client.Watch(ctx, "/w", false)
		if err != nil {
			t.Fatalf("watch %d: %v", i+1, err)
		}
		ws = append(ws, x)
	}
	if _, err := g.client.Watch(ctx, "/w", false); !errors.Is(err, sandbox.ErrLimit) {
		t.Fatalf("watch %d: %v, want a limit", MaxWatchStreams+1, err)
	}
}
