package errdefs_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/airlock-dev/airlock/errdefs"
)

func TestKinds(t *testing.T) {
	all := []error{errdefs.ErrNotFound, errdefs.ErrInvalid, errdefs.ErrUnavailable, errdefs.ErrLimit,
		errdefs.ErrExists, errdefs.ErrPermission, errdefs.ErrNotSupported, errdefs.ErrClosed, errdefs.ErrTimeout}
	for i, a := range all {
		for j, b := range all {
			if (i == j) != errors.Is(fmt.Errorf("op x: %w", a), b) {
				t.Errorf("errors.Is(%v, %v) = %v", a, b, i != j)
			}
		}
	}
	cmd := fmt.Errorf("exec \"nope\": %w", errdefs.ErrCommandNotFound)
	if !errors.Is(cmd, errdefs.ErrNotFound) || !errors.Is(cmd, errdefs.ErrCommandNotFound) || errors.Is(cmd, errdefs.ErrPermission) {
		t.Errorf("command not found: %v", cmd)
	}
	if errors.Is(fmt.Errorf("x: %w", errdefs.ErrNotFound), errdefs.ErrCommandNotFound) {
		t.Error("a plain not-found is not a command not found")
	}
	noexec := fmt.Errorf("exec \"/etc\": %w", errdefs.ErrCannotExecute)
	if !errors.Is(noexec, errdefs.ErrPermission) || errors.Is(noexec, errdefs.ErrNotFound) {
		t.Errorf("cannot execute: %v", noexec)
	}
}

func ExampleErrNotFound() {
	err := fmt.Errorf("get sandbox %q: %w", "sb-1", errdefs.ErrNotFound)
	fmt.Println(err, errors.Is(err, errdefs.ErrNotFound))
	// Output: get sandbox "sb-1": not found true
}
