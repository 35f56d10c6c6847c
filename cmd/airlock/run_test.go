package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad input to `airlock run` is refused with exit 125 and a message saying
// what is wrong and where, before any sandbox exists.
func TestRunBadInput(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("version: 1\nlimits:\n  memroy: 1Gi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no command", []string{"run"}, "no command given"},
		{"unknown flag", []string{"run", "--frobnicate", "--", "true"}, "flag provided but not defined: -frobnicate"},
		{"bad memory", []string{"run", "--memory", "lots", "--", "true"}, "--memory"},
		{"negative pids", []string{"run", "--pids", "-3", "--", "true"}, "pids"},
		{"bad timeout", []string{"run", "--timeout", "soon", "--", "true"}, "--timeout"},
		{"missing policy file", []string{"run", "--policy", "nope.yaml", "--", "true"}, "nope.yaml"},
		{"policy and profile", []string{"run", "--policy", "bad.yaml", "--profile", "default", "--", "true"}, "exclusive"},
		{"unknown field in policy", []string{"run", "--policy", "bad.yaml", "--", "true"}, "bad.yaml:3"},
		{"unknown profile", []string{"run", "--profile", "nosuch", "--", "true"}, "nosuch"},
		{"unknown backend", []string{"run", "--backend", "vmware", "--", "true"}, "vmware"},
		{"relative deny path", []string{"run", "--deny", "etc/passwd", "--", "true"}, "etc/passwd"},
		{"empty env name", []string{"run", "--env", "=x", "--", "true"}, "--env"},
		{"bad network mode", []string{"run", "--network", "sometimes", "--", "true"}, "sometimes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := runAirlock(t, dir, c.args...)
			if code != exitAirlock {
				t.Errorf("exit %d, want %d (stderr %q)", code, exitAirlock, errOut)
			}
			if !strings.Contains(errOut, c.want) {
				t.Errorf("stderr %q does not mention %q", errOut, c.want)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
		})
	}
}

func TestUnknownCommand(t *testing.T) {
	_, errOut, code := runAirlock(t, t.TempDir(), "frobnicate")
	if code != exitAirlock || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Errorf("exit %d stderr %q", code, errOut)
	}
}
