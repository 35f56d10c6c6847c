package mcptools

import (
	"errors"
	"fmt"
	"strings"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/sandbox"
)

// Errors of the tools' own argument checks.
var (
	errMissing = fmt.Errorf("bad argument: %w", sandbox.ErrInvalid)
	errNotOurs = fmt.Errorf("%w", sandbox.ErrNotFound)
)

// Hints for errors of commands and file writes.
const (
	hintCommand = "If the command was not found, it is not installed in the sandbox and cannot be downloaded unless the network allows it; check with run_command `command -v NAME`."
	hintWrite   = "Write under the sandbox's workdir (see create_sandbox) or /tmp: everything else is read-only."
)

// explain turns an error into the text of an MCP tool error: what failed,
// in words the model can act on, and what to do next. Only this edge maps
// error kinds to advice.
func explain(op string, err error, hint string) error {
	msg := err.Error()
	var ce *client.Error
	if errors.As(err, &ce) {
		msg = ce.Message // without the HTTP status: the model cannot act on it
	}
	var advice string
	switch {
	case errors.Is(err, errNotOurs), errors.Is(err, sandbox.ErrNotFound) && strings.Contains(msg, "sandbox \"") && !strings.Contains(msg, "process"):
		advice = "The sandbox does not exist (it may have expired or been destroyed): call list_sandboxes, or create_sandbox for a new one."
	case errors.Is(err, sandbox.ErrNotFound):
		advice = "Not found."
	case errors.Is(err, sandbox.ErrPermission):
		advice = "The sandbox's policy forbids this; it cannot be changed from inside."
	case errors.Is(err, sandbox.ErrLimit):
		advice = "A limit was reached: destroy sandboxes you no longer need (destroy_sandbox), or produce less output."
	case errors.Is(err, sandbox.ErrTimeout):
		advice = "It took too long: pass a larger timeout_seconds, or run it with background=true."
	case errors.Is(err, sandbox.ErrClosed):
		advice = "The sandbox ended: create_sandbox for a new one."
	case errors.Is(err, sandbox.ErrInvalid):
		advice = "Fix the arguments and call again."
	case errors.Is(err, sandbox.ErrUnavailable), errors.Is(err, sandbox.ErrNotSupported):
		advice = "This host cannot do it; tell the user."
	default:
		advice = "This looks like a problem of the sandbox service, not of your call; retry once, then tell the user."
	}
	if hint != "" && !errors.Is(err, errNotOurs) {
		advice += " " + hint
	}
	return fmt.Errorf("%s failed: %s. %s", op, strings.TrimSuffix(msg, "."), advice)
}
