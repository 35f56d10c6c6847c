package images

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// fileLock is a held flock.
type fileLock struct{ f *os.File }

// lockFile takes a flock on path (made when missing), exclusive or
// shared, waiting until ctx ends.
func lockFile(ctx context.Context, path string, exclusive bool) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("image store: lock %s: %w", path, err)
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	for delay := time.Millisecond; ; delay = min(delay*2, 100*time.Millisecond) {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return &fileLock{f: f}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("image store: lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("image store: wait for lock %s: %w", path, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// tryLock takes an exclusive flock on an existing path without waiting:
// nil (and no error) when someone holds it.
func tryLock(path string) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, err
	}
	return &fileLock{f: f}, nil
}

func (l *fileLock) unlock() {
	if l != nil && l.f != nil {
		l.f.Close() // closing the last descriptor releases the flock
		l.f = nil
	}
}

func checkPlatform() error { return nil }
