package native

import (
	"strings"
	"testing"
)

// TestExecRightAfterCopy: a file the sandbox has just written through the
// write mediator runs at once (cp x ./y && ./y, as build scripts and
// installers do). The mediator closes its copy of the descriptor before
// the open is answered; when it closed it after, the exec failed now and
// then with ETXTBSY ("Text file busy", seen in CI's race run of
// TestEgressProgramRulesReliable).
func TestExecRightAfterCopy(t *testing.T) {
	b := testBackend(t)
	ws := workspace(t)
	script := "cd " + ws + " && for i in $(seq 300); do cp /bin/true ./t$i && ./t$i || { echo failed at $i; exit 1; }; rm -f ./t$i; done; echo ok"
	code, out := runDirect(t, b, testPolicy(t, ws, nil), "/bin/sh", "-c", script)
	if code != 0 || !strings.HasSuffix(strings.TrimSpace(out), "ok") {
		t.Fatalf("copy then exec, 300 times: exit %d, %q", code, out)
	}
}
