package ocitest

import (
	"fmt"
	"os"
	"path/filepath"
)

// OperatorConfig writes into dir the airlock runtime's operator ceiling
// (what AIRLOCK_OCI_CONFIG names): the default profile, strict beside it,
// and a policy open-network (network: open) for the pods that need theirs.
// It returns the config's path.
func OperatorConfig(dir string) (string, error) {
	pol := filepath.Join(dir, "open-network.yaml")
	if err := os.WriteFile(pol, []byte("version: 1\nnetwork:\n  mode: open\n"), 0o644); err != nil {
		return "", err
	}
	cfg := filepath.Join(dir, "oci.yaml")
	body := fmt.Sprintf("profile: default\nprofiles: [default, strict]\npolicies:\n  open-network: %s\n", pol)
	return cfg, os.WriteFile(cfg, []byte(body), 0o644)
}
