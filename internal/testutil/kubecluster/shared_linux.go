package kubecluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil"
)

var (
	sharedMu  sync.Mutex
	shared    *Cluster
	sharedErr error
)

// Require checks what a cluster needs (root, containerd, its shim, runc,
// etcd, ctr, crictl, ip, iptables-save, busybox, the Debian test images),
// skipping t with the reason (failing it in CI) when one is missing.
func Require(t testing.TB) {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireLinux(t)
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "etcd", "ip", "iptables-save", "ip6tables-save", "nft"} {
		testutil.RequireBinary(t, b)
	}
	if _, err := crictlPath(); err != nil {
		testutil.Skip(t, "crictl not installed (scripts/deps.sh)")
	}
	for _, f := range []string{"/bin/busybox", "/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/loopback"} {
		if _, err := os.Stat(f); err != nil {
			testutil.Skip(t, f+" not installed (scripts/deps.sh)")
		}
	}
	dir := os.Getenv("AIRLOCK_TEST_IMAGES")
	if dir == "" {
		dir = "/var/cache/airlock-test-images"
	}
	for _, im := range []string{"debian-bookworm-python.tar", "debian-bookworm-minbase.tar"} {
		if _, err := os.Stat(dir + "/" + im); err != nil {
			testutil.Skip(t, "test image "+im+" not built (scripts/test-images.sh)")
		}
	}
}

// Shared returns the test binary's one cluster, starting it on first use
// (every test of a binary shares it: a start costs seconds). The test
// binary's TestMain must call StopShared after m.Run.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	Require(t)
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		shared, sharedErr = Start(context.Background(), Options{Airlock: testutil.AirlockBinary(t), LogDir: os.Getenv("AIRLOCK_KUBE_LOGS")})
	}
	if sharedErr != nil {
		t.Fatalf("start the cluster: %v", sharedErr)
	}
	return shared
}

// StopShared stops the shared cluster if one was started, returning Stop's
// error (the host differs from before, or something could not be undone),
// joined with what the cluster left: its directory, or a process naming
// it. A later Shared starts a new one. Test binaries call it from
// TestMain, after every test, so that the check never depends on the
// order tests run in.
func StopShared() error {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		return nil
	}
	dir := shared.Dir
	err := shared.Stop()
	shared, sharedErr = nil, nil
	if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
		err = errors.Join(err, fmt.Errorf("cluster dir %s left behind: %v", dir, serr))
	}
	if pids := ProcessesUnder(dir); len(pids) > 0 {
		err = errors.Join(err, fmt.Errorf("processes of the cluster left: %v", pids))
	}
	return err
}

// ProcessesUnder lists the processes whose command line names dir.
func ProcessesUnder(dir string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), dir) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}
