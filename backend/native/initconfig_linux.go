package native

// initConfig is everything the init needs, computed by the host and passed
// as JSON in a memfd (fd 3). The init trusts it (it comes from the host,
// before anything untrusted runs) but validates its shape.
type initConfig struct {
	ID            string    `json:"id"`
	Hostname      string    `json:"hostname"`
	RootSize      int64     `json:"root_size"`
	Mounts        []mountOp `json:"mounts"`
	Landlock      []llRule  `json:"landlock,omitempty"`
	UseLandlock   bool      `json:"use_landlock"`
	Seccomp       []bpfInsn `json:"seccomp,omitempty"`
	SeccompNotify bool      `json:"seccomp_notify"`
	Rlimits       []rlimit  `json:"rlimits,omitempty"`
	// KeepCaps, when set, are the capabilities root inside keeps
	// (rootCapabilities; keepCapabilities); else it holds none.
	KeepCaps []int `json:"keep_caps,omitempty"`
	// DropGroups: leave no supplementary group (a normal user's sandbox
	// with subordinate ids keeps the caller's otherwise).
	DropGroups bool `json:"drop_groups,omitempty"`
	// Overlay, when set, makes the root an overlay of image layers with
	// the sandbox's writable layer (instead of a tmpfs of binds); it
	// stays writable.
	Overlay *overlayRoot `json:"overlay,omitempty"`
	// Exec, when set, makes the init run this command itself (stdio
	// inherited) instead of serving the agent protocol: the backend's own
	// tests use it to check confinement independently of the agent.
	Exec    []string `json:"exec,omitempty"`
	Env     []string `json:"env,omitempty"`
	Workdir string   `json:"workdir,omitempty"`
}

// overlayRoot is the overlayfs mount of an image root: its options and
// the directory to be in while mounting (layer paths may be relative to
// it: see imageroot.Options).
type overlayRoot struct {
	// FD: the host made the overlay (a root host: with its credentials)
	// and passed it, detached, as fdOverlay; else the init mounts it
	// with Options (from Chdir).
	FD bool `json:"fd,omitempty"`
	// Mapped: the number of image layers the host idmapped and sent with
	// the "go" (lowest first, then the writable layer's directory); the
	// init mounts the overlay from them in its own user namespace.
	Mapped  int    `json:"mapped,omitempty"`
	Chdir   string `json:"chdir,omitempty"`
	Options string `json:"options,omitempty"`
}

type rlimit struct {
	Resource int    `json:"r"`
	Cur      uint64 `json:"c"`
	Max      uint64 `json:"m"`
}

// initStatus is the init's one report to the host over the control socket:
// setup failed (Error, Stage) or succeeded (with the seccomp listener fd
// attached when notification is used).
type initStatus struct {
	OK    bool   `json:"ok"`
	Stage string `json:"stage,omitempty"`
	Error string `json:"error,omitempty"`
	// Timing is microseconds per setup phase, for debug logs.
	Timing map[string]int64 `json:"timing,omitempty"`
}

// File descriptors the init inherits.
const (
	fdConfig  = 3 // memfd with the JSON initConfig
	fdControl = 4 // SOCK_SEQPACKET to the host: "go" in, initStatus out
	fdChannel = 5 // byte stream for the agent session
	fdOverlay = 6 // an image root's overlay, detached (overlayRoot.FD)
)
