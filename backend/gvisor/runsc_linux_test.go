package gvisor

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

func TestParsePlatforms(t *testing.T) {
	cases := []struct {
		name, in string
		want     []string
	}{
		{"runsc 2022", "  -panic-log string\n    \tfile path\n  -platform string\n    \tspecifies which platform to use: ptrace (default), kvm. (default \"ptrace\")\n  -profile\n", []string{"ptrace", "kvm"}},
		{"runsc 2024", "  -platform string\n    \tspecifies which platform to use: systrap (default), ptrace, kvm. (default \"systrap\")\n", []string{"systrap", "ptrace", "kvm"}},
		{"no flag", "  -root string\n    \troot dir\n", nil},
		{"no colon", "  -platform string\n    \tplatform name\n", nil},
		{"unknown names dropped", "  -platform string\n    \tuse: ptrace, tdx, ptrace.\n", []string{"ptrace"}},
		{"empty", "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := parsePlatforms(c.in); !slices.Equal(got, c.want) {
				t.Errorf("parsePlatforms = %q, want %q", got, c.want)
			}
		})
	}
}

func FuzzParsePlatforms(f *testing.F) {
	f.Add("  -platform string\n    \tspecifies which platform to use: ptrace (default), kvm.\n")
	f.Add("-platform\n:")
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range parsePlatforms(s) {
			if p != PlatformPtrace && p != PlatformSystrap && p != PlatformKVM {
				t.Fatalf("unknown platform %q", p)
			}
		}
	})
}

func TestChoosePlatform(t *testing.T) {
	none, dev, works := kvmState{}, kvmState{Device: true}, kvmState{Device: true, Works: true}
	cases := []struct {
		want    string
		have    []string
		kvm     kvmState
		got     string
		errKind error
	}{
		{"", []string{"ptrace", "kvm"}, dev, "ptrace", nil}, // a device alone is not enough
		{"", []string{"systrap", "ptrace", "kvm"}, dev, "systrap", nil},
		{"", []string{"systrap", "ptrace", "kvm"}, works, "kvm", nil}, // kvm where a trial worked
		{"", []string{"systrap", "ptrace"}, works, "systrap", nil},
		{"", []string{"systrap", "ptrace", "kvm"}, kvmState{Works: true}, "systrap", nil}, // device gone since
		{"", nil, none, "ptrace", nil},
		{"", []string{"kvm"}, dev, "", sandbox.ErrUnavailable},
		{"kvm", []string{"ptrace", "kvm"}, none, "", sandbox.ErrUnavailable},
		{"kvm", []string{"ptrace", "kvm"}, dev, "kvm", nil},
		{"systrap", []string{"ptrace", "kvm"}, none, "", sandbox.ErrUnavailable},
		{"ptrace", []string{"systrap", "ptrace"}, none, "ptrace", nil},
		{"xen", []string{"ptrace"}, none, "", sandbox.ErrInvalid},
	}
	for _, c := range cases {
		got, err := choosePlatform(c.want, c.have, c.kvm)
		if got != c.got || (c.errKind == nil) != (err == nil) || (c.errKind != nil && !errors.Is(err, c.errKind)) {
			t.Errorf("choosePlatform(%q, %q, %+v) = %q, %v; want %q, %v", c.want, c.have, c.kvm, got, err, c.got, c.errKind)
		}
	}
}

// fakeRunsc writes a shell script standing in for runsc in the KVM trial
// (a unit test of the decision; the real runsc's platforms are tested
// by TestCurrentRunsc and every sandbox test).
func fakeRunsc(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "runsc")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestKVMCheck(t *testing.T) {
	all := []string{"kvm", "ptrace", "systrap"}
	ok := fakeRunsc(t, `case "$*" in *"do /bin/true"*) exit 0;; esac; exit 3`)
	fails := fakeRunsc(t, `case "$*" in *"do /bin/true"*) echo "error: kvm: no vCPU" >&2; exit 1;; esac; exit 0`)
	hangs := fakeRunsc(t, `case "$*" in *"do /bin/true"*) exec sleep 60;; esac; exit 0`)
	defer func(d time.Duration) { kvmTrialTimeout = d }(kvmTrialTimeout)
	kvmTrialTimeout = 2 * time.Second
	cases := []struct {
		name, runsc   string
		have          []string
		device, guest bool
		works         bool
		why           string
	}{
		{"not built in", ok, []string{"ptrace", "systrap"}, true, false, false, "not built into this runsc"},
		{"no device", ok, all, false, false, false, "no /dev/kvm"},
		{"nested", ok, all, true, true, false, "virtual machine"},
		{"trial works", ok, all, true, false, true, "works"},
		{"trial fails", fails, all, true, false, false, "error: kvm: no vCPU"},
		{"trial hangs", hangs, all, true, false, false, "no answer in 2s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A hanging trial returning at all shows it is bounded.
			works, why := kvmCheck(t.Context(), c.runsc, c.have, c.device, c.guest)
			if works != c.works || !strings.Contains(why, c.why) {
				t.Errorf("kvmCheck = %v, %q; want %v, %q", works, why, c.works, c.why)
			}
		})
	}
}

func TestMissingRunscNamesPackage(t *testing.T) {
	info := RunscInfo(t.Context(), "/nonexistent/runsc", "")
	if !errors.Is(info.Err, sandbox.ErrUnavailable) {
		t.Fatalf("Err = %v, want ErrUnavailable", info.Err)
	}
	if got := info.Err.Error(); !strings.Contains(got, "make deps") || !strings.Contains(got, "apt-get install runsc") {
		t.Errorf("error %q does not say how to install runsc", got)
	}
	b := New(Config{Runsc: "/nonexistent/runsc", StateDir: t.TempDir()})
	p := b.Probe(t.Context())
	if p.Available || !strings.Contains(p.Reason, "runsc") {
		t.Errorf("Probe = %+v", p)
	}
	_, err := b.Create(t.Context(), sandbox.Spec{ID: "x1", Policy: testPolicy(t, t.TempDir(), nil)})
	if !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("Create without runsc: %v, want ErrUnavailable", err)
	}
}
