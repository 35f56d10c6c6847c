package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// asUser runs the airlock binary at bin in ws as uid:uid, with a clean
// environment, and returns stdout, stderr and the exit code.
func asUser(t *testing.T, uid uint32, bin, ws string, args ...string) (string, string, int) {
	t.Helper()
	return runAs(t, int(uid), int(uid), nil, bin, ws, []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "LANG=C.UTF-8"}, args...)
}

// userWorkspace copies the binary where a normal user can run it and
// makes a workspace that user owns.
func userWorkspace(t *testing.T, uid int) (bin, ws string) {
	base := t.TempDir()
	os.Chmod(filepath.Dir(base), 0o755)
	os.Chmod(base, 0o755)
	ws = filepath.Join(base, "ws")
	os.Mkdir(ws, 0o755)
	os.Chown(ws, uid, uid)
	bin = filepath.Join(base, "airlock")
	b, err := os.ReadFile(testutil.AirlockBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(bin, b, 0o755)
	return bin, ws
}

// doctorLimits is what `airlock doctor --json` says about native's limits.
func doctorLimits(t *testing.T, uid uint32, bin, ws string) string {
	t.Helper()
	out, errs, code := asUser(t, uid, bin, ws, "doctor", "--json")
	var rep doctorReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("doctor: %d %q %q", code, out, errs)
	}
	nat := rep.Backends["native"]
	if !nat.Available || nat.Details["limits"] == "" {
		t.Fatalf("doctor on native: %+v", nat)
	}
	return nat.Details["limits"]
}

// TestDoctorLimitsAsNormalUser (issue 25 item 5): doctor, run by a
// normal user, says whether that user's runs can enforce limits, and
// what it says is what runs do: when it says they cannot, a default run
// fails with one message naming every missing controller, the flags it
// names make the run work, and the delegation it names (done as root)
// makes limits enforced — a memory hog is killed by the limit.
func TestDoctorLimitsAsNormalUser(t *testing.T) {
	testutil.RequireRoot(t) // to become the normal user and to delegate
	const uid = 65534
	bin, ws := userWorkspace(t, uid)
	verdict := doctorLimits(t, uid, bin, ws)
	t.Logf("doctor: %s", verdict)
	_, errs, code := asUser(t, uid, bin, ws, "run", "--", "true")
	if strings.HasPrefix(verdict, "memory, pids and cpus limits enforced") {
		if code != 0 {
			t.Fatalf("doctor says limits are enforced, the run fails: %d %q", code, errs)
		}
		return // a host that delegates cgroups already: nothing more to show
	}
	if !strings.HasPrefix(verdict, "NOT ENFORCED") {
		t.Fatalf("doctor's verdict is neither: %q", verdict)
	}
	// One message, every controller doctor named.
	if code != 125 || strings.Count(errs, "airlock run:") != 1 {
		t.Fatalf("a run doctor said would fail: %d %q", code, errs)
	}
	for _, c := range []string{"memory", "pids", "cpu"} {
		if strings.Contains(verdict, " "+c) != strings.Contains(errs, " "+c) {
			t.Errorf("doctor and the run disagree about %s:\ndoctor %q\nrun %q", c, verdict, errs)
		}
	}
	flags := regexp.MustCompile(`pass ((?:--\w+ 0 ?)+)`).FindStringSubmatch(verdict)
	if flags == nil {
		t.Fatalf("doctor names no flags: %q", verdict)
	}
	args := append(append([]string{"run"}, strings.Fields(flags[1])...), "--", "id", "-u")
	if out, errs, code := asUser(t, uid, bin, ws, args...); code != 0 || out != "65534\n" {
		t.Fatalf("with doctor's flags %q: %d %q %q", flags[1], code, out, errs)
	}
	delegate(t, verdict)
	if v := doctorLimits(t, uid, bin, ws); !strings.HasPrefix(v, "memory, pids and cpus limits enforced") {
		t.Fatalf("after doctor's delegation, doctor says: %q", v)
	}
	if out, errs, code := asUser(t, uid, bin, ws, "run", "--", "id", "-u"); code != 0 || out != "65534\n" {
		t.Fatalf("default limits after the delegation: %d %q %q", code, out, errs)
	}
	// The limit is enforced: tail holds a line of 128 MiB in memory, which
	// works without a limit and is killed under 48 MiB (the agent, in the
	// same cgroup, needs some ten of those).
	hog := "head -c 134217728 /dev/zero | tail -n 1 | wc -c"
	if out, errs, code := asUser(t, uid, bin, ws, "run", "--memory", "0", "--", "sh", "-c", hog); code != 0 || out != "134217728\n" {
		t.Fatalf("the hog without a limit: %d %q %q", code, out, errs)
	}
	if out, errs, code := asUser(t, uid, bin, ws, "run", "--memory", "48M", "--", "bash", "-c", "set -o pipefail; "+hog); code != 137 || out == "134217728\n" || !strings.Contains(errs, "Killed") {
		t.Fatalf("the hog under --memory 48M: %d %q %q", code, out, errs)
	}
}

// delegate runs, as root, the delegation doctor's verdict names (the
// command between backquotes), and removes the directories afterwards.
func delegate(t *testing.T, verdict string) {
	t.Helper()
	m := regexp.MustCompile("`(mkdir -p ([^`&]+) && chown [^`]+)`").FindStringSubmatch(verdict)
	if m == nil {
		t.Fatalf("doctor names no delegation: %q", verdict)
	}
	dirs := strings.Fields(m[2])
	t.Cleanup(func() {
		for _, d := range dirs {
			os.Remove(d)
		}
	})
	if out, err := exec.Command("sh", "-c", m[1]).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v %s", m[1], err, out)
	}
}
