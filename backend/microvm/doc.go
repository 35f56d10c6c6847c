// Package microvm is Airlock's hardware-isolated backend: each sandbox is
// its own virtual machine with its own Linux kernel, run by a VMM driver —
// QEMU `-M microvm` (KVM when a probe guest really boots under it, TCG
// otherwise) or Firecracker (where a firecracker binary and a working KVM
// exist). The guest kernel is Debian's, prepared at build time (`make
// guest-kernel`); the guest's init is the airlock binary itself (package
// guest), which builds the sandbox's root from the host directories the
// policy shares (9p, read-only at the host unless the policy makes them
// writable), then serves the agent protocol on a virtio-serial port (vsock
// under Firecracker). There is no NIC: egress goes through the agent's
// tunnel to the host proxy as in every other backend.
//
// A protected workspace (protect_config) is shared read-only and given a
// writable layer inside the VM; Sync writes the changes back through the
// guard on the host (internal/writeback), as gVisor does.
//
// Snapshots: VM RAM lives in a shared-memory file, so a template (a VM
// booted to the point where it waits for its config) is saved as a small
// device-state file; sandboxes are restored from it copy-on-write (Pool,
// Fork). The VMM runs in its own cgroup with the VM's limits, with QEMU's
// seccomp sandbox on and no capabilities, in a root of its own (its
// directory, kernel and shares bound idmapped, the system directories
// read-only, nothing else) and as uid 0 of a user namespace mapped onto a
// leased host id range, so an escape from the VM lands in a jail as no
// host user (jailroot_linux.go).
//
// It must never widen the policy it is given, choose a weaker setup
// silently (no kernel, no QEMU: an error naming what to install), or leave
// a VMM process, socket, state file or shared-memory file behind when
// Create fails or a sandbox ends.
package microvm
