package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"syscall"

	"github.com/airlock-dev/airlock/sandbox"
)

// errnoKind wraps err with the sandbox error kind of its errno.
func errnoKind(err error) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return err
	}
	var kind error
	switch errno {
	case syscall.ENOENT, syscall.ENOTDIR:
		kind = sandbox.ErrNotFound
	case syscall.EACCES, syscall.EPERM, syscall.EROFS, syscall.ETXTBSY, syscall.ENOEXEC:
		kind = sandbox.ErrPermission
	case syscall.EEXIST:
		kind = sandbox.ErrExists
	case syscall.ENOTEMPTY, syscall.EISDIR, syscall.EINVAL, syscall.ELOOP, syscall.ENAMETOOLONG,
		syscall.EBUSY, syscall.ENXIO, syscall.ENODEV, syscall.EXDEV:
		kind = sandbox.ErrInvalid
	case syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG, syscall.EMFILE, syscall.ENFILE,
		syscall.ENOMEM, syscall.E2BIG, syscall.EAGAIN:
		kind = sandbox.ErrLimit
	default:
		return err
	}
	return fmt.Errorf("%w (%w)", err, kind)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
