package main

import (
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
)

func TestHoistHost(t *testing.T) {
	for _, tc := range []struct {
		in, host, rest string
	}{
		{"--host H ls", "H", "ls"},
		{"ls --host H", "H", "ls"},
		{"ls --all --host=H --json", "H", "ls --all --json"},
		{"rm a b --host H", "H", "rm a b"},
		{"exec --env A=B --host H sb-1 -- true", "H", "exec --env A=B sb-1 -- true"},
		{"exec sb-1 --host H -- true", "H", "exec sb-1 -- true"},
		// Never from the command.
		{"exec sb-1 -- cmd --host X", "", "exec sb-1 -- cmd --host X"},
		{"exec sb-1 cmd --host X", "", "exec sb-1 cmd --host X"},
		{"exec --workdir /w sb-1 cmd --host X", "", "exec --workdir /w sb-1 cmd --host X"},
	} {
		host, _, rest, err := hoistHost(strings.Fields(tc.in))
		if err != nil || host != tc.host || strings.Join(rest, " ") != tc.rest {
			t.Errorf("%q: host %q rest %q (%v), want %q %q", tc.in, host, strings.Join(rest, " "), err, tc.host, tc.rest)
		}
	}
	if _, _, _, err := hoistHost([]string{"ls", "--host"}); err == nil {
		t.Error("--host without a value: no error")
	}
}

// Events are printed for people by default, and never raw: a sandbox
// chooses much of their text.
func TestFormatEvent(t *testing.T) {
	e := api.Event{Time: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Type: "egress", Message: "denied \x1b[2Jx",
		Fields: map[string]any{"host": "evil\x1b]0;pwn\x07", "port": 443, "args": []string{"a b"}}}
	got := formatEvent(e)
	if strings.ContainsAny(got, "\x1b\x07") {
		t.Fatalf("control characters printed: %q", got)
	}
	for _, want := range []string{"egress", "denied ?[2Jx", `args=["a b"]`, "port=443", `host="evil\x1b]0;pwn\a"`} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
}
