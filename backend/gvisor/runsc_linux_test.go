package gvisor

import (
	"errors"
	"slices"
	"strings"
	"testing"

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
	cases := []struct {
		want    string
		have    []string
		kvm     bool
		got     string
		errKind error
	}{
		{"", []string{"ptrace", "kvm"}, true, "ptrace", nil}, // kvm never automatic
		{"", []string{"systrap", "ptrace", "kvm"}, false, "systrap", nil},
		{"", nil, false, "ptrace", nil},
		{"", []string{"kvm"}, true, "", sandbox.ErrUnavailable},
		{"kvm", []string{"ptrace", "kvm"}, false, "", sandbox.ErrUnavailable},
		{"kvm", []string{"ptrace", "kvm"}, true, "kvm", nil},
		{"systrap", []string{"ptrace", "kvm"}, false, "", sandbox.ErrUnavailable},
		{"ptrace", []string{"systrap", "ptrace"}, false, "ptrace", nil},
		{"xen", []string{"ptrace"}, false, "", sandbox.ErrInvalid},
	}
	for _, c := range cases {
		got, err := choosePlatform(c.want, c.have, c.kvm)
		if got != c.got || (c.errKind == nil) != (err == nil) || (c.errKind != nil && !errors.Is(err, c.errKind)) {
			t.Errorf("choosePlatform(%q, %q, kvm=%v) = %q, %v; want %q, %v", c.want, c.have, c.kvm, got, err, c.got, c.errKind)
		}
	}
}

func TestMissingRunscNamesPackage(t *testing.T) {
	info := RunscInfo(t.Context(), "/nonexistent/runsc", "")
	if !errors.Is(info.Err, sandbox.ErrUnavailable) {
		t.Fatalf("Err = %v, want ErrUnavailable", info.Err)
	}
	if got := info.Err.Error(); !strings.Contains(got, "apt-get install runsc") {
		t.Errorf("error %q does not name the Debian package", got)
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
