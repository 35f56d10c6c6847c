//go:build unix

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/airlock-dev/airlock/sandbox"
)

// serveLockName is the file in the data directory a running server
// (`airlock serve`, or `airlock mcp`'s embedded one) holds locked (flock)
// for its whole life, with its pid and command in it.
const serveLockName = "serve.lock"

// lockServeData takes the data directory for this server (kind: the
// command, "serve" or "mcp") before anything of it is read or changed
// (the store's crash recovery, the runtime directory, the backends'
// cleanup): a second server on the same --data finds the first alive here
// and leaves without touching its state. The lock goes with the process,
// however it ends.
func lockServeData(data, kind string) (*os.File, error) {
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", data, err)
	}
	p := filepath.Join(data, serveLockName)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: lock: %w", data, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(p)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := "another airlock serve"
			if f := bytes.Fields(b); len(f) > 0 {
				if len(f) > 1 {
					who = "another airlock " + string(f[1])
				}
				if pid, err := strconv.Atoi(string(f[0])); err == nil {
					who += " (pid " + strconv.Itoa(pid) + ")"
				}
			}
			return nil, fmt.Errorf("--data %s: %s is running on this data directory; it was left alone: stop it first, or give this one another --data: %w", data, who, sandbox.ErrExists)
		}
		return nil, fmt.Errorf("data directory %s: lock %s: %w", data, p, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+" "+kind+"\n"), 0)
	}
	return f, nil
}
