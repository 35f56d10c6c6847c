package microvm

import (
	"context"
	"net"
)

// Machine is one VM for a VMM driver to start: everything is decided
// (paths exist, sizes are final) before a driver sees it.
type Machine struct {
	ID        string
	Dir       string // the VM's private directory (sockets, logs)
	Kernel    string // ELF vmlinux
	Initrd    string // initramfs
	Cmdline   string // kernel command line
	VCPUs     int
	MemoryMiB int
	KVM       bool
	// Shares are the 9p devices, always MaxShares of them (unused ones
	// share an empty directory), so every VM has the same device layout
	// and any can be restored from any template of its size.
	Shares []Share
	// MemFile, when set, backs guest RAM with this file: Shared maps it
	// MAP_SHARED (a template being made: its RAM is the file), else
	// MAP_PRIVATE (a VM restored from a template: copy-on-write, the file
	// is never written).
	MemFile string
	Shared  bool
	// Incoming, when set, restores the VM from this device-state file
	// instead of booting (RAM comes from MemFile).
	Incoming string
	// Cgroups are the cgroup directories the VMM process runs in.
	Cgroups []string
	// Disks are block devices (read-only images), for VMMs without shared
	// filesystems (Firecracker) and image roots.
	Disks []Disk
	// Deny are host paths the VMM process must not see (bound over in its
	// own mount namespace): what the policy denies inside a shared tree.
	Deny []string
}

// Share is one host directory exported to the guest.
type Share struct {
	Tag      string // mount tag the guest mounts
	Path     string // host directory
	ReadOnly bool   // enforced by the VMM, not only by the guest
	Unused   bool   // a padding device (the empty directory)
}

// Disk is one block device.
type Disk struct {
	ID       string
	Path     string
	ReadOnly bool
}

// VMM starts VMs; a driver per VMM program.
type VMM interface {
	Name() string
	// Version is the VMM program's version line.
	Version(ctx context.Context) (string, error)
	// Start starts m and returns once the VMM runs (the guest may still
	// be booting). The caller owns the VM: Kill ends it.
	Start(ctx context.Context, m *Machine) (VM, error)
}

// VM is one running VMM process.
type VM interface {
	// Pid is the VMM process's host PID.
	Pid() int
	// Channel connects to the agent channel (virtio-serial or vsock).
	Channel(ctx context.Context) (net.Conn, error)
	// Resume starts the vCPUs of a VM that came up paused (restored).
	Resume(ctx context.Context) error
	// SaveState pauses the VM and writes its device state (and RAM that
	// is not in a shared file) to path; the VM stays paused.
	SaveState(ctx context.Context, path string) error
	// Kill ends the VMM process at once; it returns when it has exited.
	Kill()
	// Done is closed when the VMM process has exited.
	Done() <-chan struct{}
	// Output is the tail of the VMM's and the guest console's output.
	Output() string
}
