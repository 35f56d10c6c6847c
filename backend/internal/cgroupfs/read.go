package cgroupfs

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ReadInt reads a single-number cgroup file (memory.current, pids.current,
// ...); 0 when dir is "" or the file is missing or unreadable.
func ReadInt(dir, file string) int64 {
	if dir == "" {
		return 0
	}
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// ReadKey reads the value of key from a flat-keyed cgroup file ("key value"
// lines: cpu.stat, memory.events, ...); 0 when absent.
func ReadKey(dir, file, key string) int64 {
	if dir == "" {
		return 0
	}
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
