package kubecluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// KubeBinaries returns the dir holding the cluster's binaries, building
// them if needed (scripts/kube.sh: cached per machine, instant when there).
func KubeBinaries(ctx context.Context) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "kube.sh"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("scripts/kube.sh: %v: %s", err, errb.String())
	}
	lines := strings.Fields(out.String())
	if len(lines) == 0 {
		return "", errors.New("scripts/kube.sh printed no dir")
	}
	return lines[len(lines)-1], nil
}

// repoRoot is the Airlock checkout the caller runs in (tests run in their
// package's dir): the nearest parent with Airlock's go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/airlock-dev/airlock\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("kubecluster: not inside an Airlock checkout (no go.mod of github.com/airlock-dev/airlock above the working dir)")
		}
		dir = parent
	}
}
