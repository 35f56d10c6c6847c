package main

import "golang.org/x/sys/unix"

// raiseNoFile lifts the soft descriptor limit to the hard one, as any
// attacker would before exhausting descriptors.
func raiseNoFile() {
	var r unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &r) == nil {
		r.Cur = r.Max
		_ = unix.Setrlimit(unix.RLIMIT_NOFILE, &r)
		note("RLIMIT_NOFILE %d", r.Max)
	}
}
