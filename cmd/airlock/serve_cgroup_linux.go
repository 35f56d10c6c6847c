package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/internal/mountinfo"
)

// removeCgroupParents removes this server's (now empty) per-backend cgroup
// parents after a clean shutdown: name-* directories at each cgroup
// hierarchy's root and next to our own cgroup. rmdir only removes empty
// cgroups, so a sandbox still running anywhere keeps its parent.
func removeCgroupParents(prefix string) {
	mounts, err := mountinfo.Self()
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
	for _, m := range mounts {
		if m.FSType != "cgroup" && m.FSType != "cgroup2" {
			continue
		}
		for dir := range own {
			matches, _ := filepath.Glob(filepath.Join(m.Point, dir, prefix+"-*"))
			for _, match := range matches {
				os.Remove(match) // rmdir; fails (kept) while not empty
			}
		}
	}
}
