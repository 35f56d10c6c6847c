package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestDispatch(t *testing.T) {
	var got []string
	subs := []subcommand{
		{[]string{"ls", "list"}, func(args []string) int { got = args; return 7 }},
	}
	for _, c := range []struct {
		args           []string
		code           int
		stdout, stderr string
		ranWith        []string
	}{
		{args: nil, code: exitAirlock, stderr: "USAGE"},
		{args: []string{"--help"}, code: 0, stdout: "USAGE"},
		{args: []string{"help"}, code: 0, stdout: "USAGE"},
		{args: []string{"lst"}, code: exitAirlock, stderr: `airlock grp: unknown command "lst"` + "\nUSAGE"},
		{args: []string{"list", "-q"}, code: 7, ranWith: []string{"-q"}},
		{args: []string{"ls"}, code: 7, ranWith: []string{}},
	} {
		got = nil
		var o, e bytes.Buffer
		code := dispatchTo(&o, &e, "grp", "USAGE", subs, c.args)
		if code != c.code || o.String() != c.stdout || e.String() != c.stderr || strings.Join(got, " ") != strings.Join(c.ranWith, " ") {
			t.Errorf("%q: exit %d stdout %q stderr %q ran with %q", c.args, code, o.String(), e.String(), got)
		}
	}
}
