package agent

import (
	"testing"
)

func TestExecStdoutStderrExit(t *testing.T) {
	g := startGuest(t, guestOptions{})
	r := mustRun(t, g.client, sh("echo out; echo err >&2; exit 3"))
	if r.stdout != "out\n" || r.stderr != "err\n" || r.status.Code != 3 || r.status.Signal != 0 {
		t.Fatalf("got %+v", r)
	}
}
