package hostfs

import (
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/airlock-dev/airlock/policy"
)

// Under reports whether path is one of roots or below one.
func Under(path string, roots []string) bool {
	for _, r := range roots {
		if path == r || r == "/" || strings.HasPrefix(path, r+"/") {
			return true
		}
	}
	return false
}

// Depth is the number of components of a clean absolute path ("/" is 0).
func Depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

// TopLevel reports whether p names an entry of the root directory.
func TopLevel(p string) bool { return strings.Count(p, "/") == 1 && len(p) > 1 }

// IsSystemDir reports whether p is one of policy.SystemDirs.
func IsSystemDir(p string) bool { return slices.Contains(policy.SystemDirs, p) }

// SortMounts orders a mount plan so that a mount point's parents come
// first; among mounts on the same path the plan's order is kept, except
// that those for which last is true (deny mounts) go after the others.
func SortMounts[M any](ms []M, dst func(M) string, last func(M) bool) {
	rank := func(m M) int {
		if last(m) {
			return 1
		}
		return 0
	}
	sort.SliceStable(ms, func(i, j int) bool {
		di, dj := Depth(dst(ms[i])), Depth(dst(ms[j]))
		if di != dj {
			return di < dj
		}
		if dst(ms[i]) == dst(ms[j]) {
			return rank(ms[i]) < rank(ms[j])
		}
		return false
	})
}

// HostSource maps path inside the sandbox to the host path the deepest
// bind covering it shows there. bind returns a mount's host source and
// destination, and false for mounts that are not host binds.
func HostSource[M any](path string, ms []M, bind func(M) (src, dst string, ok bool)) (string, bool) {
	var bestSrc, bestDst string
	found := false
	for _, m := range ms {
		src, dst, ok := bind(m)
		if !ok || !Under(path, []string{dst}) {
			continue
		}
		if !found || len(dst) > len(bestDst) {
			bestSrc, bestDst, found = src, dst, true
		}
	}
	if !found {
		return "", false
	}
	return filepath.Join(bestSrc, strings.TrimPrefix(path, bestDst)), true
}

// Inside is where host path p shows in a sandbox of filesystem policy f
// (policy.Filesystem.Inside).
func Inside(f *policy.Filesystem, p string) string { return f.Inside(p) }
