package volume

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/errdefs"
)

// WaitFree waits (up to timeout) until no loop device is backed by image:
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
		if !backing(abs) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("volume %s: still mounted by a process that has not let go after %s: %w", image, timeout, errdefs.ErrUnavailable)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// backing reports whether a loop device is backed by the file abs.
func backing(abs string) bool {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && strings.TrimSpace(string(b)) == abs {
			return true
		}
	}
	return false
}
