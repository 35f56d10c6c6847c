//go:build !linux

package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/errdefs"
)

func TestRunSaysItNeedsLinux(t *testing.T) {
	for _, b := range []string{"", "native", "gvisor", "auto"} {
		err := checkRunHost(b)
		if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "needs Linux") {
			t.Errorf("backend %q: %v", b, err)
		}
	}
	if err := checkRunHost("wasm"); err != nil {
		t.Errorf("wasm: %v", err)
	}
}
