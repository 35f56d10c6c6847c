package kube

import (
	"fmt"
	"os"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil/kubecluster"
)

// TestMain stops the shared cluster after the tests (and benchmarks) and
// fails the run if the host is not as it was before the cluster started,
// or the cluster left its directory or a process (whatever order the tests
// ran in; TestClusterChangesHost shows the check can tell).
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		clusterChild()
	}
	code := m.Run()
	if err := kubecluster.StopShared(); err != nil {
		fmt.Fprintf(os.Stderr, "kube: stopping the cluster: %v\n", err)
		code = 1
	}
	os.Exit(code)
}
