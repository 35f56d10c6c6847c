package guest

// Paths in the initramfs (the init's root before it moves into the
// sandbox's).
const (
	ModulesDir   = "lib/airlock/modules"       // the kernel modules, relative to the initramfs root
	ModulesOrder = "lib/airlock/modules.order" // their file names in load order
	sandboxRoot  = "/sandbox"                  // the sandbox's root while it is built
	// AgentPath is where the airlock binary appears inside the sandbox.
	AgentPath = "/.airlock/airlock"
	// LayersDir shows the writable layer of each overlaid share read-only
	// inside, at LayersDir/N (N its index in the boot config's mounts): an
	// empty one means nothing changed there, and the host's Sync skips it.
	LayersDir = "/.airlock/layers"
	// PortName is the virtio-serial port of the agent channel.
	PortName = "airlock"
	// VsockPort is the vsock port the init listens on under Firecracker.
	VsockPort = 1024
	// VsockFlag on the kernel command line selects vsock as the channel.
	VsockFlag = "airlock.vsock=1"
)
