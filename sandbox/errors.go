package sandbox

import "github.com/airlock-dev/airlock/errdefs"

// Error kinds, the errdefs values under their historical names so backends
// keep writing sandbox.ErrX. Every package wraps one of these with %w so
// that the edges (CLI exit codes, HTTP status, MCP errors) can translate
// them with errors.Is without knowing which backend produced them.
var (
	ErrNotFound        = errdefs.ErrNotFound
	ErrInvalid         = errdefs.ErrInvalid
	ErrUnavailable     = errdefs.ErrUnavailable
	ErrLimit           = errdefs.ErrLimit
	ErrExists          = errdefs.ErrExists
	ErrPermission      = errdefs.ErrPermission
	ErrNotSupported    = errdefs.ErrNotSupported
	ErrClosed          = errdefs.ErrClosed
	ErrTimeout         = errdefs.ErrTimeout
	ErrCommandNotFound = errdefs.ErrCommandNotFound
	ErrCannotExecute   = errdefs.ErrCannotExecute
)
