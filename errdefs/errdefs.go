// Package errdefs holds Airlock's error kinds: the small set of sentinel
// values every package wraps with %w, so that only the edges (HTTP, MCP,
// CLI) decide what a kind means to a caller (a status, a code, an exit
// code). It is a leaf: it imports nothing, so any package, the Go SDK
// included, can use the kinds without pulling in the rest of Airlock. It
// must never grow behaviour beyond the kinds themselves.
package errdefs

// kind is one error kind. A sub-kind (a more precise case of a kind, such
// as a command that does not exist) unwraps to its parent, so
// errors.Is(err, ErrNotFound) holds for ErrCommandNotFound as well.
type kind struct {
	msg    string
	parent error
}

func (k *kind) Error() string { return k.msg }

// Unwrap returns the parent kind (nil for a top-level kind).
func (k *kind) Unwrap() error { return k.parent }

// The kinds. Each is a distinct pointer: compare with errors.Is.
var (
	// ErrNotFound: the sandbox, process, path or key does not exist.
	ErrNotFound error = &kind{msg: "not found"}
	// ErrInvalid: the caller's input is wrong (policy, path, argument).
	ErrInvalid error = &kind{msg: "invalid argument"}
	// ErrUnavailable: a protection, backend or host feature the request
	// needs is missing. Never silently degraded (fail closed).
	ErrUnavailable error = &kind{msg: "unavailable"}
	// ErrLimit: a quota or resource limit was hit.
	ErrLimit error = &kind{msg: "limit exceeded"}
	// ErrExists: the object already exists.
	ErrExists error = &kind{msg: "already exists"}
	// ErrPermission: the policy forbids the operation.
	ErrPermission error = &kind{msg: "permission denied"}
	// ErrNotSupported: the backend cannot do this by its nature (e.g.
	// signals in wasm).
	ErrNotSupported error = &kind{msg: "not supported by this backend"}
	// ErrClosed: the sandbox has been destroyed or its agent is gone.
	ErrClosed error = &kind{msg: "sandbox closed"}
	// ErrTimeout: the wall-clock limit ended the operation.
	ErrTimeout error = &kind{msg: "timeout"}

	// ErrCommandNotFound: the command to execute does not exist (a
	// sub-kind of ErrNotFound; the CLI exits 127).
	ErrCommandNotFound error = &kind{msg: "command not found", parent: ErrNotFound}
	// ErrCannotExecute: the command exists but cannot be executed (not
	// executable, a directory, a bad format; a sub-kind of ErrPermission;
	// the CLI exits 126).
	ErrCannotExecute error = &kind{msg: "cannot execute", parent: ErrPermission}
)
