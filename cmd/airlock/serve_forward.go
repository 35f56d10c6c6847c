package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/backend"
)

// kubeBinary is the build that links the Kubernetes backend; this one does
// not (every sandbox's init and agent is this binary, and the cluster's
// client libraries doubled its size and start-up).
const kubeBinary = "airlock-kube"

// wantsMissingBackend reports whether serve's arguments name a backend this
// build lacks (--backend kubernetes, or a --kube-* flag), before they are
// parsed: the flags of a backend exist only in the build that has it.
func wantsMissingBackend(args []string) bool {
	if backend.Has("kubernetes") {
		return false
	}
	for i, a := range args {
		if a == "--" {
			return false
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			continue
		}
		if strings.HasPrefix(name, "kube") {
			return true
		}
		if name == "backend" || name == "default-backend" {
			if !hasVal && i+1 < len(args) {
				val = args[i+1]
			}
			if val == "kubernetes" {
				return true
			}
		}
	}
	return false
}

// forwardToKube runs the airlock-kube binary beside this one (or on PATH)
// in place of this process, with the same arguments. It returns only when
// it cannot, with the exit code of the failure.
func forwardToKube(cmd string, args []string) int {
	path := ""
	if self, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(self), kubeBinary); isExecutable(p) {
			path = p
		}
	}
	if path == "" {
		if p, err := exec.LookPath(kubeBinary); err == nil {
			path = p
		}
	}
	if path == "" {
		fmt.Fprintf(os.Stderr, "airlock %s: the kubernetes backend is not in this build: it lives in %s (build it with `make build`, or `go build -tags kubernetes -o airlock-kube ./cmd/airlock`), which was found neither beside this binary nor on PATH\n", cmd, kubeBinary)
		return exitAirlock
	}
	err := execInPlace(path, append([]string{kubeBinary, cmd}, args...))
	fmt.Fprintf(os.Stderr, "airlock %s: run %s: %v\n", cmd, path, err)
	return exitAirlock
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
