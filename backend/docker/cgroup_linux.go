package docker

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/airlock-dev/airlock/backend/internal/cgroupfs"
)

// containerCgroup is where dockerd put a container (found from its init's
// /proc/PID/cgroup, so the cgroup driver and version do not matter). The
// backend only reads it: the limits are dockerd's to set.
type containerCgroup struct {
	v2     string            // unified directory ("" on v1)
	v1Dirs map[string]string // controller -> directory
}

const cgroupRoot = "/sys/fs/cgroup"

func findCgroup(pid int) *containerCgroup {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return &containerCgroup{}
	}
	defer f.Close()
	cg := &containerCgroup{v1Dirs: map[string]string{}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controller-list:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || strings.Contains(parts[2], "..") {
			continue
		}
		if parts[1] == "" {
			if parts[0] == "0" {
				cg.v2 = filepath.Join(cgroupRoot, parts[2])
			}
			continue
		}
		for _, ctrl := range strings.Split(parts[1], ",") {
			switch ctrl {
			case "memory", "cpuacct", "pids":
				cg.v1Dirs[ctrl] = filepath.Join(cgroupRoot, ctrl, parts[2])
			}
		}
	}
	if len(cg.v1Dirs) > 0 {
		cg.v2 = "" // a hybrid host: the limits are in v1
	}
	return cg
}

type cgroupStats struct {
	MemoryBytes, MemoryPeak, CPUNanos int64
	Pids                              int
	OOMKills                          int64
}

func (cg *containerCgroup) oomKills() int64 {
	if cg.v2 != "" {
		return cgroupfs.ReadKey(cg.v2, "memory.events", "oom_kill")
	}
	if d, ok := cg.v1Dirs["memory"]; ok {
		return cgroupfs.ReadKey(d, "memory.oom_control", "oom_kill")
	}
	return 0
}

func (cg *containerCgroup) stats() cgroupStats {
	var s cgroupStats
	if d := cg.v2; d != "" {
		s.MemoryBytes = cgroupfs.ReadInt(d, "memory.current")
		s.MemoryPeak = cgroupfs.ReadInt(d, "memory.peak")
		s.OOMKills = cgroupfs.ReadKey(d, "memory.events", "oom_kill")
		s.CPUNanos = cgroupfs.ReadKey(d, "cpu.stat", "usage_usec") * 1000
		s.Pids = int(cgroupfs.ReadInt(d, "pids.current"))
		return s
	}
	if d, ok := cg.v1Dirs["memory"]; ok {
		s.MemoryBytes = cgroupfs.ReadInt(d, "memory.usage_in_bytes")
		s.MemoryPeak = cgroupfs.ReadInt(d, "memory.max_usage_in_bytes")
		s.OOMKills = cgroupfs.ReadKey(d, "memory.oom_control", "oom_kill")
	}
	if d, ok := cg.v1Dirs["cpuacct"]; ok {
		s.CPUNanos = cgroupfs.ReadInt(d, "cpuacct.usage")
	}
	if d, ok := cg.v1Dirs["pids"]; ok {
		s.Pids = int(cgroupfs.ReadInt(d, "pids.current"))
	}
	return s
}
