package sandboxtest

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/internal/mountinfo"
)

// HostLeaks looks for anything on the host still naming the sandbox id: a
// process whose command line or environment holds it (the suite's helper
// file name carries the ID), a mount, a cgroup, or an entry under one of
// dirs (state and temp dirs the backend uses). It is a building block for
// Options.LeakCheck; backends add their own specific checks.
func HostLeaks(id string, dirs ...string) error {
	if id == "" {
		return nil
	}
	var found []string
	self := fmt.Sprint(os.Getpid())
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name() == self || e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		for _, f := range []string{"cmdline", "environ"} {
			b, _ := os.ReadFile("/proc/" + e.Name() + "/" + f)
			if bytes.Contains(b, []byte(id)) && !zombie(e.Name()) {
				found = append(found, fmt.Sprintf("process %s (%s mentions %s): %q", e.Name(), f, id, clip(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))))
				break
			}
		}
	}
	if mounts, err := mountinfo.Self(); err == nil {
		for _, m := range mounts {
			if strings.Contains(m.Point, id) || strings.Contains(m.Root, id) || strings.Contains(m.Source, id) {
				found = append(found, fmt.Sprintf("mount: %s (%s from %s%s)", m.Point, m.FSType, m.Source, m.Root))
			}
		}
	}
	walk := func(root string, depth int) {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if strings.Count(strings.TrimPrefix(p, root), "/") > depth {
				return fs.SkipDir
			}
			if p != root && strings.Contains(d.Name(), id) {
				found = append(found, "left behind: "+p)
				if d.IsDir() {
					return fs.SkipDir
				}
			}
			return nil
		})
	}
	walk("/sys/fs/cgroup", 4)
	for _, d := range dirs {
		walk(d, 3)
	}
	if len(found) > 0 {
		return fmt.Errorf("%d leftovers of %s: %s", len(found), id, strings.Join(found, "; "))
	}
	return nil
}

func zombie(pid string) bool {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
}

func clip(b []byte) string {
	if len(b) > 120 {
		b = b[:120]
	}
	return string(b)
}
