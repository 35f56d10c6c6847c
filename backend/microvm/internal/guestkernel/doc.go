// Package guestkernel turns Debian's linux-image package, unpacked at
// build time (`make guest-kernel`), into what a microVM boots: the
// uncompressed ELF vmlinux (QEMU's PVH entry boots it ~3x faster than the
// bzImage under TCG) and the kernel modules the guest's init loads, in
// dependency order. It never runs at sandbox creation: the backend only
// reads the directory it wrote.
//
// It parses untrusted-looking input (a bzImage header, ELF .modinfo
// sections) defensively: every offset is bounds-checked, and a malformed
// file is an error, never a panic.
package guestkernel
