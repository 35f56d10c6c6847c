package main

import (
	"strings"
	"testing"
)

// TestAllowRequestProgramsRefused: a bad programs form of --allow-request
// stops `airlock run` before anything starts, with exit 125 and a message
// naming the flag and what is wrong.
func TestAllowRequestProgramsRefused(t *testing.T) {
	ws := t.TempDir()
	for _, tc := range []struct{ rule, want string }{
		{"GET x.test/** programs=./git", `program "./git": want an absolute clean path`},
		{"GET x.test/** programs=", `only "programs=PROG[,PROG...]" may follow`},
		{"GET x.test/** git", `only "programs=PROG[,PROG...]" may follow`},
	} {
		out, errs, code := runIn(t, ws, "", "run", "--allow-request", tc.rule, "--", "echo", "started")
		if code != 125 || !strings.Contains(errs, "--allow-request") || !strings.Contains(errs, tc.want) || strings.Contains(out, "started") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 125 naming %q", tc.rule, code, out, errs, tc.want)
		}
	}
}
