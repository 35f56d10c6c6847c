package kube

import (
	"fmt"
	"os"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil/kubecluster"
)

// TestMain stops the shared cluster after the tests (and benchmarks) and
// fails the run if the host is not as it was before the cluster started.
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
