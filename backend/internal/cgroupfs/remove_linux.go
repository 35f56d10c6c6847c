package cgroupfs

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Remove removes the cgroup directory d, retrying for about a second while
// it is busy (just-killed processes keep it populated for a moment); busy,
// when not nil, runs before each retry (to kill stragglers). A missing
// directory is fine.
func Remove(d string, busy func(dir string)) error {
	var err error
	for i := 0; i < 200; i++ {
		err = unix.Rmdir(d)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		if busy != nil {
			busy(d)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s: %w", d, err)
}
