package sandbox

import (
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/policy"
)

// ValidID reports whether id may name a sandbox: it becomes part of host
// names (cgroups, state files, directories, runsc containers). 1-128 of
// [A-Za-z0-9_.-], starting alphanumeric. (Not a regexp: compiling one at
// init costs every airlock start ~0.2 ms.)
func ValidID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '_' && c != '.' && c != '-') {
			return false
		}
	}
	return true
}

// Environ is a sandbox's base environment, sorted: the policy's (the
// allowed, non-secret variables of host, K=V), then what host components
// add (Spec.Env: egress proxy variables, secret placeholders), which win.
func Environ(pol *policy.Policy, host []string, extra map[string]string) []string {
	m := map[string]string{}
	for _, kv := range pol.Environ(host) {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	for k, v := range extra {
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}
