package main

// Exhaustion attacks (memory, disk, file descriptors, output). Each is capped
// so that a sandbox without the limit ends the attack as "escaped" instead of
// taking the test host down; the runner then checks the host stayed healthy.

import (
	"fmt"
	"os"
	"strconv"
)

func init() {
	register("memory", attackMemory)
	register("disk-fill", attackDiskFill)
	register("fds", attackFDs)
	register("flood", attackFlood)
}

func intParam(p params, k string) int {
	n, err := strconv.Atoi(p.get(k))
	if err != nil {
		fail("parameter %s: %v", k, err)
	}
	return n
}

// sink keeps allocations reachable so the collector cannot free them.
var sink [][]byte

func attackMemory(p params) {
	capMB := intParam(p, "cap_mb")
	const chunk = 16 << 20
	for total := 0; total < capMB<<20; total += chunk {
		b := make([]byte, chunk)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		sink = append(sink, b)
		if total%(256<<20) == 0 {
			note("allocated %d MiB", total>>20)
		}
	}
	escaped("allocated and touched %d MiB without being stopped", capMB)
}

func attackDiskFill(p params) {
	dir, capMB := p.get("dir"), intParam(p, "cap_mb")
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	f, err := os.CreateTemp(dir, "fill-")
	if err != nil {
		blocked("create file in %s: %v", dir, err)
	}
	name := f.Name()
	defer os.Remove(name)
	for mb := 0; mb < capMB; mb++ {
		if _, err := f.Write(buf); err != nil {
			f.Close()
			os.Remove(name)
			blocked("disk full after %d MiB in %s: %v", mb, dir, err)
		}
	}
	if err := f.Close(); err != nil {
		os.Remove(name)
		blocked("close after %d MiB in %s: %v", capMB, dir, err)
	}
	os.Remove(name)
	escaped("wrote %d MiB to %s without hitting a limit", capMB, dir)
}

func attackFDs(p params) {
	path, limit := p.get("path"), intParam(p, "cap")
	raiseNoFile()
	files := make([]*os.File, 0, 1024)
	for len(files) < limit {
		f, err := os.Open(path)
		if err != nil {
			blocked("descriptor limit after %d open files: %v", len(files), err)
		}
		files = append(files, f)
	}
	escaped("held %d open files without hitting a limit", len(files))
}

func attackFlood(p params) {
	capMB := intParam(p, "cap_mb")
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = 'A' + byte(i%26)
	}
	for mb := 0; mb < capMB; mb++ {
		if _, err := os.Stdout.Write(buf); err != nil {
			fmt.Fprintf(os.Stderr, "BLOCKED: output refused after %d MiB: %v\n", mb, err)
			os.Exit(exitBlocked)
		}
	}
	fmt.Fprintf(os.Stderr, "ESCAPED: wrote %d MiB of output\n", capMB)
	os.Exit(exitEscaped)
}
