package admission

import (
	"os"

	"github.com/airlock-dev/airlock/policy"
)

// HostPolicies resolves API policies with the policy package. A sandbox's
// workspace is also its home, so "~" paths in profiles point inside the
// sandbox's own directory, never at the server user's home; the base
// environment is minimal, never the server's own.
type HostPolicies struct{}

// ParseRaw parses an inline policy: JSON is YAML, so the strict YAML loader
// (unknown fields, sizes like "512Mi", durations like "30s") applies.
func (HostPolicies) ParseRaw(data []byte) (*policy.Policy, error) {
	return policy.ParseRaw("request policy", data)
}

// Resolve layers raw on profile and resolves it for one sandbox.
func (HostPolicies) Resolve(raw *policy.Policy, profile, workspace, rootfs string) (*policy.Policy, error) {
	if raw == nil {
		raw = &policy.Policy{}
	} else {
		raw = raw.Clone()
	}
	if rootfs != "" {
		raw.Filesystem.Rootfs = rootfs
	}
	p, err := policy.WithProfile(raw, profile)
	if err != nil {
		return nil, err
	}
	return p.Resolve(policy.ResolveEnv{
		Cwd:  workspace,
		Home: workspace,
		Environ: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"HOME=" + workspace,
			"LANG=C.UTF-8",
		},
		UID: os.Getuid(),
		GID: os.Getgid(),
		Exists: func(p string) bool {
			if p == workspace {
				return true // made right after resolving
			}
			_, err := os.Stat(p)
			return err == nil
		},
	})
}
