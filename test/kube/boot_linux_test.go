package kube

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/internal/testutil/kubecluster"
)

// TestStartFailsClosed: a Start that cannot finish leaves nothing: a bad
// airlock path is refused before anything is made, and a cluster that
// fails half-way (here: agent-sandbox's CRDs missing, found only once the
// apiserver is up) is torn down, the host as before. This file sorts
// first, so these run before the shared cluster holds the machine's lock.
func TestStartFailsClosed(t *testing.T) {
	kubecluster.Require(t)
	ctx := context.Background()
	for _, bad := range []string{"bin/airlock", "/nonexistent/airlock", "/etc/passwd"} {
		_, err := kubecluster.Start(ctx, kubecluster.Options{Airlock: bad})
		if err == nil || !strings.Contains(err.Error(), "Options.Airlock") {
			t.Errorf("Start with Airlock %q: %v, want a refusal naming Options.Airlock", bad, err)
		}
	}
	bins, err := kubecluster.KubeBinaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	noCRDs := t.TempDir()
	for _, b := range []string{"kube", "agent-sandbox-controller", "kubectl"} {
		if err := os.Symlink(filepath.Join(bins, b), filepath.Join(noCRDs, b)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := kubecluster.Start(ctx, kubecluster.Options{Airlock: testutil.AirlockBinary(t), BinDir: noCRDs})
	if err == nil {
		c.Stop()
		t.Fatal("Start without agent-sandbox's CRDs succeeded")
	}
	if c == nil || c.Before == nil {
		t.Fatalf("Start failed half-way but returned no stopped cluster: %v", err)
	}
	if !strings.Contains(err.Error(), "CRDs") || strings.Contains(err.Error(), "stopping") {
		t.Fatalf("Start without CRDs: %v, want the CRDs named and a clean stop", err)
	}
	after := lockedSnapshot(t)
	if d := c.Before.Diff(after); len(d) > 0 {
		t.Fatalf("host differs after a failed Start:\n%s", strings.Join(d, "\n"))
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Errorf("cluster dir %s left behind: %v", c.Dir, err)
	}
	if pids := kubecluster.ProcessesUnder(noCRDs); len(pids) > 0 {
		t.Errorf("processes left: %v", pids)
	}
}

// lockedSnapshot records the host holding the machine's cluster lock, so
// that no other cluster (another test binary's) runs meanwhile.
func lockedSnapshot(t *testing.T) *kubecluster.HostState {
	t.Helper()
	release, err := kubecluster.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	h, err := kubecluster.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return h
}
