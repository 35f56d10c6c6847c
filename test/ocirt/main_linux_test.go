package ocirt

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil/kubecluster"
)

// TestMain holds the machine's cluster lock for the whole package: its
// containerd and dockerd add network namespaces, CNI state and iptables
// chains on the host, which test/kube's cluster records before it starts
// and restores after it stops; run at once (go test runs packages in
// parallel), one would take the other's for its own.
func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		os.Exit(m.Run()) // the tests that need root skip (or fail in CI) on their own
	}
	release, err := kubecluster.Lock(context.Background())
	if err != nil {
		fmt.Fprintf(os.Stderr, "ocirt: the machine's cluster lock: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	release()
	os.Exit(code)
}
