package hostfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/airlock-dev/airlock/sandbox"
)

// LstatSource looks at host path src that a policy shares into a sandbox
// (what names it in errors: "read_only path", "workspace", ...), not
// following a final symlink. A path that cannot be looked at is
// ErrInvalid, except that with optional a missing one gives nil info and
// no error (the caller skips it).
func LstatSource(src, what string, optional bool) (fs.FileInfo, error) {
	fi, err := os.Lstat(src)
	if err != nil {
		if optional && errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("%s %s: %w: %v", what, src, sandbox.ErrInvalid, err)
	}
	return fi, nil
}
