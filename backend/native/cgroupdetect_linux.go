package native

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/airlock-dev/airlock/internal/mountinfo"
)

// cgroupHost describes the cgroup hierarchies of this host as seen by this
// process: the cgroup2 mount (if any) and each v1 controller's mount.
type cgroupHost struct {
	v2Mount string            // cgroup2 mount point, "" if none
	v2Own   string            // our cgroup in the v2 hierarchy ("/..." )
	v1Mount map[string]string // v1 controller -> mount point
	v1Own   map[string]string // v1 controller -> our cgroup path
}

var (
	cgroupHostOnce sync.Once
	cgroupHostInfo cgroupHost
)

// hostCgroups detects the hierarchies once per process.
func hostCgroups() cgroupHost {
	cgroupHostOnce.Do(func() { cgroupHostInfo = detectCgroups("/proc/self/mountinfo", "/proc/self/cgroup") })
	return cgroupHostInfo
}

var v1Controllers = []string{"memory", "pids", "cpu", "cpuacct"}

func detectCgroups(mountinfoFile, selfCgroup string) cgroupHost {
	h := cgroupHost{v1Mount: map[string]string{}, v1Own: map[string]string{}}
	mounts, _ := mountinfo.Read(mountinfoFile) // none readable: no cgroups
	for _, m := range mounts {
		switch m.FSType {
		case "cgroup2":
			if h.v2Mount == "" {
				h.v2Mount = m.Point
			}
		case "cgroup":
			for _, c := range v1Controllers {
				if _, dup := h.v1Mount[c]; !dup && m.HasSuperOption(c) {
					h.v1Mount[c] = m.Point
				}
			}
		}
	}
	if b, err := os.ReadFile(selfCgroup); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 {
				continue
			}
			if parts[0] == "0" && parts[1] == "" {
				h.v2Own = parts[2]
				continue
			}
			for _, c := range strings.Split(parts[1], ",") {
				h.v1Own[c] = parts[2]
			}
		}
	}
	return h
}

// v2Parent is the directory under which sandbox cgroups go on cgroup2.
func (h cgroupHost) v2Parent(configured string) string {
	if h.v2Mount == "" {
		return ""
	}
	if configured != "" {
		return filepath.Join(h.v2Mount, configured)
	}
	own := h.v2Own
	if own == "" || own == "/" {
		return filepath.Join(h.v2Mount, "airlock")
	}
	return filepath.Join(h.v2Mount, filepath.Dir(own), "airlock")
}

// v1Parent is the directory for controller c under which sandbox cgroups go.
// A caller without root gets a parent of its own, airlock-UID: cgroup v1 has
// no delegation of its own, so root delegates by making that directory and
// giving it to the user (only the directory: the limits root writes in it
// bound everything under it and stay root's).
func (h cgroupHost) v1Parent(c, configured string) string {
	mp, ok := h.v1Mount[c]
	if !ok {
		return ""
	}
	if configured == "" {
		configured = v1DefaultParent(os.Geteuid())
	}
	return filepath.Join(mp, configured)
}

// v1DefaultParent names the v1 parent of a caller with euid uid.
func v1DefaultParent(uid int) string {
	if uid == 0 {
		return "airlock"
	}
	return "airlock-" + strconv.Itoa(uid)
}

// v2Controllers lists controllers the cgroup2 hierarchy offers at dir.
func v2Controllers(dir string) map[string]bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil
	}
	m := map[string]bool{}
	for _, c := range strings.Fields(string(b)) {
		m[c] = true
	}
	return m
}
