package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// runAirlock runs the built binary and returns stdout, stderr, exit code.
func runAirlock(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(testutil.AirlockBinary(t), args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func TestPolicyCheckCLI(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	unknown := filepath.Join(dir, "unknown.yaml")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(good, "version: 1\nprofile: coding-agent\nlimits:\n  memory: 3Gi\n")
	write(bad, "version: 1\nfilesystem:\n  read_only:\n    - /usr\n    - /opt\n    - etc\nlimits:\n  pids: -4\n")
	write(unknown, "version: 1\nnetwork:\n  mode: none\n  allow_all: true\n")

	out, errOut, code := runAirlock(t, dir, "policy", "check", "good.yaml")
	if code != 0 || out != "good.yaml: ok\n" || errOut != "" {
		t.Errorf("check good: code %d stdout %q stderr %q", code, out, errOut)
	}

	out, errOut, code = runAirlock(t, dir, "policy", "check", "good.yaml", "bad.yaml", "unknown.yaml")
	if code != 125 {
		t.Errorf("check bad: exit %d, want 125", code)
	}
	if out != "good.yaml: ok\n" {
		t.Errorf("check bad: stdout %q", out)
	}
	for _, want := range []string{
		`bad.yaml:6: filesystem.read_only[2]: "etc" must be an absolute path`,
		`bad.yaml:8: limits.pids: must not be negative, got -4`,
		`unknown.yaml:4: network.allow_all: unknown field "allow_all"`,
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr\n%s\nlacks %s", errOut, want)
		}
	}

	stdin := exec.Command(testutil.AirlockBinary(t), "policy", "check", "-")
	stdin.Dir = dir
	stdin.Stdin = strings.NewReader("version: 1\nlimits:\n  cpus: many\n")
	var se bytes.Buffer
	stdin.Stderr = &se
	if err := stdin.Run(); err == nil || !strings.Contains(se.String(), `-:3: limits.cpus: want a number, got "many"`) {
		t.Errorf("check -: %v %q", err, se.String())
	}

	_, errOut, code = runAirlock(t, dir, "policy", "check", "missing.yaml")
	if code != 125 || !strings.Contains(errOut, "missing.yaml: open: no such file or directory") {
		t.Errorf("check missing: exit %d stderr %q", code, errOut)
	}
	if _, _, code = runAirlock(t, dir, "policy", "check"); code != 125 {
		t.Errorf("check without files: exit %d, want 125", code)
	}
	if _, _, code = runAirlock(t, dir, "policy", "frobnicate"); code != 125 {
		t.Errorf("unknown subcommand: exit %d, want 125", code)
	}
}

func TestPolicyShowCLI(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(f, []byte("version: 1\nfilesystem:\n  read_only: [~/data]\nlimits:\n  timeout: unlimited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runAirlock(t, dir, "policy", "show", "--profile", "strict", "p.yaml")
	if code != 0 {
		t.Fatalf("show: exit %d: %s", code, errOut)
	}
	home, _ := os.UserHomeDir()
	for _, want := range []string{"profile: strict\n", "workspace: none\n", "  - " + filepath.Join(home, "data") + "\n", "timeout: unlimited\n", "mode: none\n", "protect_config: true\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("show output lacks %q:\n%s", want, out)
		}
	}
	// What show prints is itself a valid policy.
	shown := filepath.Join(dir, "shown.yaml")
	if err := os.WriteFile(shown, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := runAirlock(t, dir, "policy", "check", "shown.yaml"); code != 0 {
		t.Errorf("check of shown policy: exit %d %s %s", code, out, errOut)
	}

	_, errOut, code = runAirlock(t, dir, "policy", "show", "--profile", "yolo")
	if code != 125 || !strings.Contains(errOut, `unknown profile "yolo" (known: coding-agent, default, strict)`) {
		t.Errorf("show unknown profile: exit %d stderr %q", code, errOut)
	}

	env := exec.Command(testutil.AirlockBinary(t), "policy", "show", "--env")
	env.Dir = dir
	env.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "LANG=C.UTF-8", "OPENAI_API_KEY=sk-secret", "GITHUB_TOKEN=ghp_secret", "UNLISTED=1"}
	got, err := env.Output()
	if err != nil {
		t.Fatalf("show --env: %v", err)
	}
	if want := "HOME=" + home + "\nLANG=C.UTF-8\nPATH=/usr/bin:/bin\n"; string(got) != want {
		t.Errorf("show --env =\n%s\nwant\n%s", got, want)
	}

	out, _, code = runAirlock(t, dir, "policy", "profiles")
	if code != 0 || !strings.Contains(out, "default ") || !strings.Contains(out, "coding-agent ") || !strings.Contains(out, "strict ") {
		t.Errorf("profiles: exit %d\n%s", code, out)
	}
}
