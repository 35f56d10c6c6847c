package agent

import (
	"errors"
	"syscall"
	"testing"

	"github.com/airlock-dev/airlock/sandbox"
)

func TestErrnoKind(t *testing.T) {
	tests := []struct {
		errno syscall.Errno
		kind  error
	}{
		{syscall.ENOENT, sandbox.ErrNotFound},
		{syscall.ENOTDIR, sandbox.ErrNotFound},
		{syscall.EACCES, sandbox.ErrPermission},
		{syscall.EPERM, sandbox.ErrPermission},
		{syscall.EROFS, sandbox.ErrPermission},
		{syscall.ENOEXEC, sandbox.ErrPermission},
		{syscall.EEXIST, sandbox.ErrExists},
		{syscall.ENOTEMPTY, sandbox.ErrInvalid},
		{syscall.ELOOP, sandbox.ErrInvalid},
		{syscall.ENOSPC, sandbox.ErrLimit},
		{syscall.EDQUOT, sandbox.ErrLimit},
	}
	for _, tt := range tests {
		err := errnoKind(&pathErr{tt.errno})
		if !errors.Is(err, tt.kind) || !errors.Is(err, tt.errno) {
			t.Errorf("%v: got %v", tt.errno, err)
		}
		// The kind survives the trip over the wire.
		if back := fromWire(toWire(err)); !errors.Is(back, tt.kind) {
			t.Errorf("%v over the wire: %v", tt.errno, back)
		}
	}
	if errnoKind(nil) != nil {
		t.Error("nil error got a kind")
	}
}

type pathErr struct{ err error }

func (p *pathErr) Error() string { return "op /x: " + p.err.Error() }
func (p *pathErr) Unwrap() error { return p.err }
