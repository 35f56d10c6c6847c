package native

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil"
)

func TestHostFeaturesAndProbe(t *testing.T) {
	testutil.RequireLinux(t)
	f := HostFeatures()
	if f.Rootless != (os.Geteuid() != 0) {
		t.Fatalf("rootless %v for euid %d", f.Rootless, os.Geteuid())
	}
	if !slices.Contains([]string{"v1", "v2", "hybrid", "none"}, f.CgroupVersion) {
		t.Fatalf("cgroup version %q", f.CgroupVersion)
	}
	if f.LandlockABI != landlockABI() {
		t.Fatalf("landlock ABI %d, kernel says %d", f.LandlockABI, landlockABI())
	}
	p := New(Config{}).Probe(context.Background())
	want := f.UserNamespaces && f.LandlockABI > 0 && f.Seccomp && f.SeccompArch
	if p.Available != want || p.Isolation != "kernel" {
		t.Fatalf("probe %+v for features %+v", p, f)
	}
	if !p.Available && p.Reason == "" {
		t.Fatal("unavailable without a reason")
	}
	if p.Details["landlock_abi"] == "" || p.Details["cgroup"] != f.CgroupVersion {
		t.Fatalf("probe details %v", p.Details)
	}
}
