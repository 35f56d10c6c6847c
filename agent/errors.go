package agent

import (
	"errors"
	"strings"

	"github.com/airlock-dev/airlock/sandbox"
)

// wireError is an error as it travels on the wire: a kind naming one of
// sandbox's error kinds and a short message.
type wireError struct {
	Kind string `json:"kind,omitempty"`
	Msg  string `json:"msg"`
}

// maxErrorMsg bounds how much of a guest's error message the host keeps.
const maxErrorMsg = 512

// kinds in matching order: sub-kinds before their parents.
var kinds = []struct {
	name string
	err  error
}{
	{"command_not_found", sandbox.ErrCommandNotFound},
	{"cannot_execute", sandbox.ErrCannotExecute},
	{"not_found", sandbox.ErrNotFound},
	{"invalid", sandbox.ErrInvalid},
	{"unavailable", sandbox.ErrUnavailable},
	{"limit", sandbox.ErrLimit},
	{"exists", sandbox.ErrExists},
	{"permission", sandbox.ErrPermission},
	{"not_supported", sandbox.ErrNotSupported},
	{"closed", sandbox.ErrClosed},
	{"timeout", sandbox.ErrTimeout},
}

// toWire encodes err for the peer.
func toWire(err error) *wireError {
	we := &wireError{Msg: err.Error()}
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			we.Kind = k.name
			break
		}
	}
	return we
}

// RemoteError is an error reported by the agent. It unwraps to the
// sandbox error kind the agent named (nil for an unknown kind).
type RemoteError struct {
	Msg  string
	Kind error
}

func (e *RemoteError) Error() string {
	return "agent: " + e.Msg
}

func (e *RemoteError) Unwrap() error { return e.Kind }

// fromWire turns a guest-supplied error into a host error. The message is
// untrusted: it is truncated and stripped of control characters.
func fromWire(we *wireError) error {
	msg := we.Msg
	if len(msg) > maxErrorMsg {
		msg = msg[:maxErrorMsg] + "..."
	}
	msg = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, msg)
	re := &RemoteError{Msg: msg}
	for _, k := range kinds {
		if k.name == we.Kind {
			re.Kind = k.err
		}
	}
	return re
}

// kindError is err with a further kind (errors.Is matches both), its
// message unchanged.
type kindError struct {
	err  error
	kind error
}

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.err, e.kind} }

// commandKind narrows an error starting a command to the exec sub-kinds
// the CLI maps to 127 and 126: a missing file is a command not found, a
// permission problem (not executable, a directory, a bad format) one that
// cannot be executed.
func commandKind(err error) error {
	switch {
	case err == nil, errors.Is(err, sandbox.ErrCommandNotFound), errors.Is(err, sandbox.ErrCannotExecute):
		return err
	case errors.Is(err, sandbox.ErrNotFound):
		return &kindError{err, sandbox.ErrCommandNotFound}
	case errors.Is(err, sandbox.ErrPermission):
		return &kindError{err, sandbox.ErrCannotExecute}
	}
	return err
}
