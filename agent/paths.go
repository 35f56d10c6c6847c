package agent

import (
	"fmt"
	"path"
	"strings"

	"github.com/airlock-dev/airlock/sandbox"
)

// checkPath accepts only absolute, clean, NUL-free paths of bounded length.
// Host and guest both call it: the host before sending, the guest before
// resolving.
func checkPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty path: %w", sandbox.ErrInvalid)
	case len(p) > MaxPathLen:
		return fmt.Errorf("path longer than %d bytes: %w", MaxPathLen, sandbox.ErrInvalid)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("path %q contains NUL: %w", p, sandbox.ErrInvalid)
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q is not absolute: %w", p, sandbox.ErrInvalid)
	case path.Clean(p) != p:
		return fmt.Errorf("path %q is not clean: %w", p, sandbox.ErrInvalid)
	}
	return nil
}

// checkName accepts one directory entry name as returned by the guest.
func checkName(n string) error {
	if n == "" || n == "." || n == ".." || len(n) > 255 || strings.ContainsAny(n, "/\x00") {
		return fmt.Errorf("bad entry name %q: %w", n, errProtocol)
	}
	return nil
}
