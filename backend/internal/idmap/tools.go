package idmap

import (
	"fmt"
	"os"
	"strings"
)

// ToolDirs are where newuidmap and newgidmap are looked for (not the
// caller's PATH: they run setuid root on a sandbox's behalf).
var ToolDirs = []string{"/usr/bin", "/bin", "/usr/sbin", "/sbin"}

// Tools finds shadow-utils' newuidmap and newgidmap, which write a normal
// user's subordinate ranges into a user namespace's maps, or says how to
// get them.
func Tools() (newuid, newgid string, err error) {
	find := func(name string) string {
		for _, d := range ToolDirs {
			p := d + "/" + name
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
				return p
			}
		}
		return ""
	}
	newuid, newgid = find("newuidmap"), find("newgidmap")
	if newuid == "" || newgid == "" {
		return "", "", fmt.Errorf("a normal user's host id range needs the setuid newuidmap and newgidmap (not found in %s): install them (Debian and Ubuntu: apt-get install uidmap; Fedora: shadow-utils): %w",
			strings.Join(ToolDirs, ", "), errUnavailable)
	}
	return newuid, newgid, nil
}
