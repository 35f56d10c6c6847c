//go:build linux && !amd64

package oci

// Only x86_64 has a syscall table here: elsewhere a container's seccomp
// profile cannot be compiled and create fails closed.
var syscallNumbers = map[string]int{}
