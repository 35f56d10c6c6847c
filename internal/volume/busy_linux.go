package volume

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/internal/mountinfo"
)

// ErrHeld: an image still backs a loop device after its unmount here,
// because another mount of the same filesystem lives on: a copy of the
// mount in another mount namespace (a process that unshared or cloned
// one while the volume was mounted and has not detached or left it), or
// a file still open in a mount that had to be detached lazily. The
// filesystem was synced before the unmount, so what was written is on
// the image; Attach refuses the image until the holder lets go.
var ErrHeld = fmt.Errorf("volume still held: %w", errdefs.ErrUnavailable)

// WaitFree waits (up to timeout; 0: only looks) until no loop device is
// backed by image:
// a volume whose unmount had to be lazy (a dying sandbox's mount
// namespace still held it) is written back and gone only then, and a
// second mount of the same image before that would see stale data and
// corrupt it.
func WaitFree(image string, timeout time.Duration) error {
	abs, err := filepath.Abs(image)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		if len(backing(abs)) == 0 {
			return nil
		}
		if timeout <= 0 {
			return fmt.Errorf("volume %s: not free yet: %w", image, ErrHeld) // a look, not a wait: who holds it is not searched
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("volume %s: still mounted by a process that has not let go after %s (%s): %w", image, timeout, holders(abs), ErrHeld)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// backing returns the loop devices (their "major:minor") backed by the
// file abs.
func backing(abs string) []string {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var devs []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || strings.TrimSpace(string(b)) != abs {
			continue
		}
		dev, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(f)), "dev"))
		if err == nil {
			devs = append(devs, strings.TrimSpace(string(dev)))
		} else {
			devs = append(devs, "?")
		}
	}
	return devs
}

// holders names the processes whose mount namespace still has a mount of
// the image abs (one process per namespace, at most a few), for the
// error that says who keeps it: the reason is found where it lives.
func holders(abs string) string {
	devs := backing(abs)
	if len(devs) == 0 {
		return "no longer"
	}
	want := map[string]bool{}
	for _, d := range devs {
		want[d] = true
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	seen := map[string]bool{}
	var who []string
	for _, p := range procs {
		ns, err := os.Readlink(filepath.Join(p, "ns", "mnt"))
		if err != nil || seen[ns] {
			continue
		}
		seen[ns] = true
		mounts, err := mountinfo.Read(filepath.Join(p, "mountinfo"))
		if err != nil {
			continue
		}
		for _, m := range mounts {
			if want[m.Dev] {
				comm, _ := os.ReadFile(filepath.Join(p, "comm"))
				who = append(who, fmt.Sprintf("pid %s (%s) has it at %s", filepath.Base(p), strings.TrimSpace(string(comm)), m.Point))
				break
			}
		}
		if len(who) == 4 {
			break
		}
	}
	if len(who) == 0 {
		return "no mount of it is left in any namespace: a file is still open in a lazily detached mount"
	}
	return strings.Join(who, "; ")
}
