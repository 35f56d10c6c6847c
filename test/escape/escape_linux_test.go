package escape

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/sandbox"

	"github.com/airlock-dev/airlock/images"
)

// runner holds what every attack run needs.
type runner struct {
	f           *fixture
	attacksBin  string // static linux build of ./attacks
	attacksWasm string // wasip1 build of ./attacks
}

// backendUnderTest is one backend and how attacks reach it.
type backendUnderTest struct {
	b     sandbox.Backend
	wasm  bool // runs WASI modules only
	probe sandbox.Probe
	// image runs the attacks in image sandboxes (the busybox image's
	// overlay root, its writable layer) with the workspace at its host
	// path, so that every attack means the same as on the host root.
	image *images.Rootfs
	// rootCaps: the image sandboxes have their own host id range, so
	// root inside holds its capabilities over its own namespace.
	rootCaps bool
}

// name is the backend's name in the scorecard: an image variant is
// "native+image".
func (bk backendUnderTest) name() string {
	if bk.image != nil && bk.rootCaps {
		return bk.b.Name() + "+image+root"
	}
	if bk.image != nil {
		return bk.b.Name() + "+image"
	}
	return bk.b.Name()
}

// TestEscape runs every attack unconfined (the proof), then against every
// available backend, writes the scorecard and fails on any ESCAPED, any
// attack that could not be proven and any attack that errored.
func TestEscape(t *testing.T) {
	testutil.RequireLinux(t)
	testutil.RequireRoot(t)
	dir := t.TempDir()
	r := &runner{
		attacksBin:  buildAttacks(t, dir, "linux"),
		attacksWasm: buildAttacks(t, dir, "wasip1"),
	}
	r.f = newFixture(t, r.attacksBin)
	r.f.attacksBin = r.attacksBin
	attacks := allAttacks()

	card := &scorecard{Generated: time.Now().UTC(), Host: hostInfo()}
	proofs := map[string]proof{}
	for _, a := range attacks {
		p := r.runUnconfined(t, a)
		proofs[a.name] = p
		r.f.plant(t)
		r.f.resetVictims(t, r.attacksBin)
		must(t, copyFile(agentBinary(t), r.f.standInBin, 0o755))
		if p.NA {
			t.Logf("attack %s cannot be tried on this host: %s", a.name, p.Evidence)
		} else if !p.Proven {
			t.Errorf("attack %s does not work unconfined, so it proves nothing: %s", a.name, p.Evidence)
		}
	}

	only := os.Getenv("ESCAPE_BACKENDS") // development aid: "wasm,native"
	for _, bk := range backendsUnderTest(t, r.f) {
		name := bk.name()
		if only != "" && !strings.Contains(","+only+",", ","+name+",") {
			t.Logf("backend %s not run: ESCAPE_BACKENDS=%s", name, only)
			card.Filtered = true
			continue
		}
		card.Backends = append(card.Backends, backendInfo{Name: name, Available: bk.probe.Available, Reason: bk.probe.Reason, Isolation: bk.probe.Isolation, Limits: bk.probe.Details["isolation"]})
		if !bk.probe.Available {
			t.Logf("backend %s unavailable: %s", name, bk.probe.Reason)
			// CI installs every backend's tools (make deps): there a
			// backend that cannot run fails the suite, whatever is missing
			// (the other backends still run); elsewhere it is logged.
			if testutil.InCI() {
				t.Errorf("backend %s unavailable in CI: %s", name, bk.probe.Reason)
			}
			continue
		}
		t.Run(name, func(t *testing.T) {
			for _, a := range attacks {
				start := time.Now()
				res := r.runInside(t, bk, a)
				card.set(a, proofs[a.name], name, res)
				// The time per attack says where this suite's minutes go.
				t.Logf("%-30s %-8s %5.1fs %s", a.name, res.Verdict, time.Since(start).Seconds(), clip(res.Evidence, 200))
				switch res.Verdict {
				case Escaped:
					t.Errorf("ESCAPED: %s on %s: %s", a.name, name, res.Evidence)
				case Error:
					t.Errorf("attack %s errored on %s (neither blocked nor escaped): %s", a.name, name, res.Evidence)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := bk.b.Cleanup(ctx, nil); err != nil {
				t.Errorf("cleanup %s: %v", name, err)
			}
			if c, ok := bk.b.(interface{ Close(context.Context) error }); ok {
				c.Close(ctx)
			}
		})
	}
	for _, a := range attacks {
		if _, ok := card.row(a.name); !ok {
			card.set(a, proofs[a.name], "", result{})
		}
	}
	removeCgroupParents()
	writeScorecard(t, card)
	if len(attacks) < 40 {
		t.Errorf("only %d attacks; the suite promises at least 40", len(attacks))
	}
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// buildAttacks compiles ./attacks for goos (static).
func buildAttacks(t *testing.T, dir, goos string) string {
	t.Helper()
	out := filepath.Join(dir, "attacks-"+goos)
	goarch := runtime.GOARCH
	if goos == "wasip1" {
		goarch = "wasm"
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = "/usr/local/go/bin/go" // where CI installs it (.ci/run puts it on PATH too)
	}
	cmd := exec.Command(gobin, "build", "-trimpath", "-o", out, "./attacks")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build attacks for %s: %v\n%s", goos, err, b)
	}
	return out
}

// agentBinary is the airlock binary the backends start.
func agentBinary(t *testing.T) string { return testutil.AirlockBinary(t) }

func hostInfo() map[string]string {
	m := map[string]string{"goos": runtime.GOOS, "goarch": runtime.GOARCH}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m["kernel"] = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("runsc", "--version").Output(); err == nil {
		m["runsc"] = strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
	}
	return m
}

// removeCgroupParents removes the (empty) cgroup parents the backends under
// test made for this run; rmdir fails harmlessly on anything non-empty.
func removeCgroupParents() {
	for _, pat := range []string{"/sys/fs/cgroup/airlock-escape-*-" + strconv.Itoa(os.Getpid()), "/sys/fs/cgroup/*/airlock-escape-*-" + strconv.Itoa(os.Getpid())} {
		dirs, _ := filepath.Glob(pat)
		for _, d := range dirs {
			os.Remove(d)
		}
	}
}
