// Package guestpath checks paths a request names inside a sandbox (or
// inside an archive bound for one): absolute or relative as asked,
// NUL-free, UTF-8, bounded, with no ".." component. The guest resolves
// every path again inside its own root; this check only refuses obvious
// attacks with a clear error first. It never touches the host's files.
package guestpath

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/airlock-dev/airlock/sandbox"
)

// MaxLen bounds a path a request names.
const MaxLen = 4096

func errInvalid(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, sandbox.ErrInvalid)...)
}

// Clean validates a path inside a sandbox: absolute, NUL-free, no ".."
// component, bounded. It returns the cleaned path. The guest resolves it
// again inside the sandbox root; this check rejects obvious attacks with a
// clear error before anything reaches the sandbox.
func Clean(p string) (string, error) {
	if p == "" {
		return "", errInvalid("path: empty")
	}
	if len(p) > MaxLen {
		return "", errInvalid("path: longer than %d bytes", MaxLen)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", errInvalid("path: NUL byte")
	}
	if !utf8.ValidString(p) {
		return "", errInvalid("path: not UTF-8")
	}
	if !strings.HasPrefix(p, "/") {
		return "", errInvalid("path %q: must be absolute", p)
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return "", errInvalid("path %q: \"..\" is not allowed", p)
		}
	}
	return path.Clean(p), nil
}

// CleanRel validates a path inside an archive: relative, no "..", no
// NUL. It returns the cleaned path ("" for the root itself).
func CleanRel(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 || len(p) > MaxLen || !utf8.ValidString(p) {
		return "", errInvalid("archive entry %q: bad name", p)
	}
	if strings.HasPrefix(p, "/") {
		return "", errInvalid("archive entry %q: absolute name", p)
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return "", errInvalid("archive entry %q: \"..\" is not allowed", p)
		}
	}
	c := path.Clean(p)
	if c == "." {
		return "", nil
	}
	return c, nil
}
