package oci

import (
	"sort"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/opencontainers/runtime-spec/specs-go/features"
)

// Version is the runtime's version line for `--version` (runc's layout:
// callers parse "runc version X", "commit:", "spec:").
func Version(version string) string {
	return "runc version " + version + " (airlock)\ncommit: airlock\nspec: " + specs.Version + "\n"
}

// Features is what `features` prints: what this runtime understands, as
// the runtime spec's features document describes.
func Features(version string) features.Features {
	t, f := true, false
	var mopts []string
	for o := range mountFlags {
		mopts = append(mopts, o)
	}
	for o := range propagationFlags {
		mopts = append(mopts, o)
	}
	mopts = append(mopts, "bind", "rbind", "tmpcopyup")
	sort.Strings(mopts)
	caps := make([]string, len(capNames))
	copy(caps, capNames)
	return features.Features{
		OCIVersionMin: "1.0.0",
		OCIVersionMax: specs.Version,
		Hooks:         []string{"prestart", "createRuntime", "poststart", "poststop"},
		MountOptions:  mopts,
		Linux: &features.Linux{
			Namespaces:   []string{"cgroup", "ipc", "mount", "network", "pid", "uts"},
			Capabilities: caps,
			Cgroup:       &features.Cgroup{V1: &t, V2: &t, Systemd: &f, SystemdUser: &f},
			Seccomp: &features.Seccomp{Enabled: &t,
				Actions:   []string{"SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL", "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD", "SCMP_ACT_LOG", "SCMP_ACT_TRACE", "SCMP_ACT_TRAP"},
				Operators: []string{"SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT", "SCMP_CMP_LE", "SCMP_CMP_LT", "SCMP_CMP_MASKED_EQ", "SCMP_CMP_NE"},
				Archs:     []string{"SCMP_ARCH_X86_64"}},
			Apparmor: &features.Apparmor{Enabled: &f},
			Selinux:  &features.Selinux{Enabled: &f},
		},
		Annotations: map[string]string{
			"org.opencontainers.runc.version": version,
			"dev.airlock.runtime":             "native",
			"dev.airlock.policy.annotations":  AnnotationProfile + "," + AnnotationPolicy,
		},
		PotentiallyUnsafeConfigAnnotations: []string{AnnotationProfile, AnnotationPolicy},
	}
}
