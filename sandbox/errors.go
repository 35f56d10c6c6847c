package sandbox

import (
	"errors"

	"github.com/airlock-dev/airlock/policy"
)

// Error kinds. Every package wraps one of these with %w so that the edges
// (CLI exit codes, HTTP status, MCP errors) can translate them with errors.Is
// without knowing which backend produced them.
var (
	// ErrNotFound: the sandbox, process or path does not exist.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the caller's input is wrong (policy, path, argument).
	// It is policy.ErrInvalid, so policy errors match without wrapping.
	ErrInvalid = policy.ErrInvalid
	// ErrUnavailable: a protection, backend or host feature the request
	// needs is missing. Never silently degraded (fail closed).
	ErrUnavailable = errors.New("unavailable")
	// ErrLimit: a quota or resource limit was hit.
	ErrLimit = errors.New("limit exceeded")
	// ErrExists: the object already exists.
	ErrExists = errors.New("already exists")
	// ErrPermission: the policy forbids the operation.
	ErrPermission = errors.New("permission denied")
	// ErrNotSupported: the backend cannot do this by its nature (e.g. signals
	// in wasm). Conformance tests report such checks as "not applicable".
	ErrNotSupported = errors.New("not supported by this backend")
	// ErrClosed: the sandbox has been destroyed or its agent is gone.
	ErrClosed = errors.New("sandbox closed")
	// ErrTimeout: the wall-clock limit ended the operation.
	ErrTimeout = errors.New("timeout")
)
