package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// The default airlock binary is also every sandbox's init and agent and
// every microVM's initramfs payload: it links no orchestrator client
// (Kubernetes, and what it brings: Prometheus' client library),
// while the airlock-kube build does (so the test would see a regression
// that moved the backend back in, and not pass vacuously).
func TestSandboxBinaryLinksNoKubernetes(t *testing.T) {
	gobin := testutil.RequireBinary(t, "go")
	banned := []string{"k8s.io", "sigs.k8s.io", "github.com/airlock-dev/airlock/backend/kubernetes",
		"github.com/prometheus/client_golang"}
	deps := func(tags string) []string {
		args := []string{"list", "-deps"}
		if tags != "" {
			args = append(args, "-tags", tags)
		}
		out, err := exec.Command(gobin, append(args, "github.com/airlock-dev/airlock/cmd/airlock")...).CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		return strings.Fields(string(out))
	}
	linked := func(pkgs []string, b string) bool {
		for _, p := range pkgs {
			if p == b || strings.HasPrefix(p, b+"/") {
				return true
			}
		}
		return false
	}
	lean, kube := deps(""), deps("kubernetes")
	for _, b := range banned {
		if linked(lean, b) {
			t.Errorf("the default airlock build links %s", b)
		}
	}
	for _, b := range []string{"k8s.io", "github.com/airlock-dev/airlock/backend/kubernetes"} {
		if !linked(kube, b) {
			t.Errorf("the airlock-kube build (-tags kubernetes) does not link %s", b)
		}
	}
}
