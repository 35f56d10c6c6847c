// Package guest is the microvm backend's init inside the VM: the kernel
// starts the airlock binary from the initramfs as PID 1 (`-- __vminit` on
// its command line). It loads the kernel modules it needs, opens the agent
// channel (a virtio-serial port, or vsock under Firecracker), reads its boot
// config from the host, builds the sandbox's root (9p shares, overlays,
// tmpfs, deny mounts, injected files, a minimal /dev), drops every
// capability from what sandbox processes can get, and serves the agent
// protocol on the channel. When the host closes the channel it powers the
// VM off.
//
// Everything here runs inside the boundary: the host trusts none of it.
// It must never read configuration from anywhere but the channel (not its
// command line, not the environment).
package guest
