package main

import (
	"os"
	"path/filepath"
	"strings"
)

// removeCgroupParents removes this server's (now empty) per-backend cgroup
// parents after a clean shutdown: name-* directories at each cgroup
// hierarchy's root and next to our own cgroup. rmdir only removes empty
// cgroups, so a sandbox still running anywhere keeps its parent.
func removeCgroupParents(prefix string) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	own := map[string]bool{"/": true}
	if cg, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(cg)), "\n") {
			if parts := strings.SplitN(line, ":", 3); len(parts) == 3 {
				own[filepath.Dir(parts[2])] = true
			}
		}
	}
	for _, line := range strings.Split(string(mi), "\n") {
		f := strings.Fields(line)
		sep := -1
		for i, x := range f {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(f) || len(f) < 5 || (f[sep+1] != "cgroup" && f[sep+1] != "cgroup2") {
			continue
		}
		for dir := range own {
			matches, _ := filepath.Glob(filepath.Join(f[4], dir, prefix+"-*"))
			for _, m := range matches {
				os.Remove(m) // rmdir; fails (kept) while not empty
			}
		}
	}
}
