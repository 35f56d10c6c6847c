// Package sandbox defines the one sandbox model every backend implements:
// a Backend creates long-lived Sandboxes, in which callers run Processes and
// move files. It holds types and contracts only; it must never contain
// backend-specific code or touch the host.
package sandbox

import (
	"context"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"time"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
)

// Spec is everything a backend needs to create one sandbox. The policy is
// already resolved (profile merged, paths absolute, validated): backends
// enforce it, they never widen it.
type Spec struct {
	// ID names the sandbox on the host (cgroup, temp dirs, containers). It
	// is unique among live sandboxes; backends use it to find leftovers.
	ID string
	// Policy is the resolved policy. Must not be nil.
	Policy *policy.Policy
	// Image names the image the sandbox runs, as the caller named it (a
	// reference of the image store: "debian:bookworm"). Backends that
	// mount layers themselves (native, gvisor) need Root with it; a
	// directory here is refused (a root filesystem directory is the
	// policy's filesystem.rootfs). Empty: no image.
	Image string
	// Root is Image resolved by the image store: what native and gvisor
	// mount as the root (an overlay of the layers under a writable layer
	// private to the sandbox). The caller holds the image (a store lease)
	// until the sandbox is destroyed.
	Root *ImageRoot
	// Audit receives the sandbox's structured events. Nil discards them.
	Audit audit.Sink
	// Log is the component logger. Nil discards.
	Log *slog.Logger
	// Egress, when non-nil, is called for each outbound connection a process
	// in the sandbox opens through the in-sandbox proxy listener. The
	// backend hands it the stream; the callee enforces the network policy.
	Egress EgressHandler
	// Env is added to the sandbox's base environment by host components
	// (egress proxy variables, secret placeholders). Wins over the policy's.
	Env map[string]string
	// Files are read-only files the backend places inside the sandbox at
	// Path (e.g. the egress CA bundle, also over the system bundle path).
	Files []File
	// Caches are host directories of Airlock's own cache store bound
	// read-write at Dst (a tool's cache directory inside).
	Caches []Bind
	// Pinned are host paths the sandbox must never write, create, rename
	// or link even when a writable path holds them (the caller's policy
	// file), with what each is. Backends pin the secret files and their
	// own binary themselves.
	Pinned map[string]string
	// OwnWorkspace says the workspace directory was made for this sandbox
	// alone (a server's): a backend that runs the sandbox as host ids of
	// its own (HostIdentity) gives the workspace's root to them before
	// anything starts. Never set for a user's directory.
	OwnWorkspace bool
	// Scratch, when set, is a host directory (the backend's alone, on the
	// sandbox's disk quota with its workspace) where the backend keeps the
	// sandbox's writable layers, such as an image sandbox's overlay upper
	// directory, so that they count against the same quota. Removed by
	// the caller after Destroy.
	Scratch string
}

// ImageRoot is an image's root filesystem for one sandbox.
type ImageRoot struct {
	// Layers are the image's unpacked layer trees (overlayfs form:
	// whiteouts are 0/0 character devices, opaque directories carry
	// user.overlay.opaque), lowest first. Shared with other sandboxes and
	// never written: every write goes to the sandbox's own layer.
	Layers []string
	// Writable, when set, is a writable layer the caller made (with
	// imageroot.Make) and keeps: the backend uses it and leaves it (an
	// image build reads the step's changes from it). Empty: the backend
	// makes the sandbox's own and removes it with the sandbox.
	Writable string
}

// Bind is a host directory Src made visible at Dst inside, read-write
// unless ReadOnly.
type Bind struct {
	Src      string
	Dst      string
	ReadOnly bool
}

// File is a host-made read-only file injected into a sandbox.
type File struct {
	Path string // absolute path inside the sandbox
	Data []byte
	Mode uint32 // permission bits; 0 means 0444
}

// EgressAddr is where every backend's guest listens for its processes'
// proxy connections (HTTP(S)_PROXY inside points here; the egress proxy
// sets those variables, the backend's agent listens). Loopback exists in
// every sandbox, even one without a network.
const EgressAddr = "127.0.0.1:3128"

// EgressHandler receives tunnelled connections from inside a sandbox. The
// connection speaks HTTP proxy or SOCKS5 as the in-sandbox client sent it;
// nothing about it is trusted.
type EgressHandler interface {
	ServeEgress(ctx context.Context, sandboxID string, conn io.ReadWriteCloser)
}

// Backend creates sandboxes with one isolation technology.
//
// Implementations are safe for concurrent use. Create either returns a
// running sandbox or an error after removing everything it made (no mount,
// cgroup, process, container or temp dir left behind).
type Backend interface {
	// Name is the backend's policy name: native, gvisor, docker, microvm, wasm.
	Name() string
	// Probe reports whether this host can run the backend and, if not, why.
	Probe(ctx context.Context) Probe
	// Create starts a sandbox for spec. The error wraps ErrInvalid for a spec
	// the backend cannot honour, ErrUnavailable for missing host features.
	Create(ctx context.Context, spec Spec) (Sandbox, error)
	// Cleanup removes host leftovers (cgroups, mounts, containers, temp
	// dirs, processes) of sandboxes whose IDs are not in keep, e.g. after a
	// crash of the server. Idempotent.
	Cleanup(ctx context.Context, keep map[string]bool) error
}

// Probe is a backend's self-assessment on this host.
type Probe struct {
	Available bool              `json:"available"`
	Reason    string            `json:"reason,omitempty"` // why not, and what to install
	Isolation string            `json:"isolation"`        // kernel, medium, weak, hardware, wasm
	Details   map[string]string `json:"details,omitempty"`
}

// Sandbox is one running sandbox. All methods are safe for concurrent use.
// After Destroy (or after the sandbox died) every method returns an error
// wrapping ErrClosed.
type Sandbox interface {
	ID() string
	// Exec starts a process. It returns once the process is running (or
	// failed to start: ErrNotFound for a missing command, ErrPermission when
	// it cannot be executed). Streams in req are copied until the process
	// ends; Wait returns after they are drained.
	Exec(ctx context.Context, req ExecRequest) (Process, error)
	// Files gives access to the sandbox's filesystem as the sandbox sees it,
	// under the same policy its processes have.
	Files() Files
	// Done is closed when the sandbox has ended (destroyed, timed out, died).
	Done() <-chan struct{}
	// Stats reports resource use and violations so far.
	Stats(ctx context.Context) (Stats, error)
	// Destroy ends every process of the sandbox and removes every host
	// resource it holds. Idempotent; safe to call after the sandbox died.
	Destroy(ctx context.Context) error
}

// ExecRequest describes one process to start.
type ExecRequest struct {
	Args []string          // argv; Args[0] is looked up in PATH when it has no slash
	Env  map[string]string // added to the sandbox's environment (policy-filtered at create)
	Dir  string            // working directory inside; empty means the policy's
	// Stdin, Stdout, Stderr: nil Stdin means empty input, nil outputs
	// discard. With TTY, Stderr is unused (the terminal merges them).
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	TTY    bool
	Rows   uint16
	Cols   uint16
	// Timeout bounds this process's wall time; zero means the policy's.
	Timeout time.Duration
	// User runs the process as USER[:GROUP]: names from the sandbox's own
	// /etc/passwd and /etc/group, or numbers (uid:gid). Empty: the
	// sandbox's user. A user the sandbox cannot switch to is
	// ErrPermission, never silently the default.
	User string
}

// Syncer is implemented by sandboxes whose writes to host paths are held
// in an overlay while they run (gVisor with protect_config): Sync brings
// what changed back to the host, each write decided by the same rules as
// a mediated one, and returns what it did. Safe to call while processes
// run (it copies what is there then); callers call it once the work is
// done (airlock run: when the command exited).
type Syncer interface {
	Sync(ctx context.Context) (SyncReport, error)
}

// PortDialer is implemented by sandboxes whose host can open a byte stream
// to a TCP port on the sandbox's own loopback (the agent protocol's dial
// operation): the host side of port routes and of a browser's DevTools
// connection. Only the host can open such streams; nothing inside the
// sandbox reaches the host through them. ErrUnavailable when nothing
// listens on the port, ErrInvalid for a port outside 1..65535.
type PortDialer interface {
	DialPort(ctx context.Context, port int) (net.Conn, error)
}

// SyncReport says what a Sync did.
type SyncReport struct {
	Applied   int      // entries created, written, removed or changed
	Denied    int      // changes a rule refused (reported as denied events)
	Conflicts []string // host paths changed on the host too: left as the host has them
}

// Process is a started process.
type Process interface {
	// PID is the process ID as seen inside the sandbox (0 if meaningless).
	PID() int
	// Wait blocks until the process ended and its output is drained.
	Wait(ctx context.Context) (ExitStatus, error)
	// Signal delivers sig (a Linux signal number) to the process itself.
	// ErrNotSupported where the backend has no signals.
	Signal(ctx context.Context, sig int) error
	// Kill ends the process and everything it started that shares its
	// process group (or its cgroup, where the backend has one per
	// process): what a caller that gives up on a process (a client gone,
	// a DELETE) must use, so no descendant lives on. It returns once the
	// kill is delivered, not when the process has exited (Wait says that).
	// Idempotent: nil once the process has exited. Every backend has it.
	Kill(ctx context.Context) error
	// Resize changes the PTY window size; ErrInvalid without a TTY.
	Resize(ctx context.Context, rows, cols uint16) error
	// CloseStdin signals end of input when Stdin is still streaming.
	CloseStdin() error
}

// ExitStatus is how a process ended.
type ExitStatus struct {
	Code      int  `json:"exit_code"`                  // exit code, or 128+signal
	Signal    int  `json:"signal,omitempty"`           // terminating signal, 0 if exited
	TimedOut  bool `json:"timed_out,omitempty"`        // killed by the wall timeout
	OOM       bool `json:"oom,omitempty"`              // killed by the memory limit
	Truncated bool `json:"output_truncated,omitempty"` // output hit the limit
}

// Files is the sandbox's filesystem API. Paths are absolute paths inside the
// sandbox; they are resolved inside it (never following a link out of it) and
// checked against the policy by the sandbox side, and re-checked by the host.
type Files interface {
	ReadFile(ctx context.Context, path string) (io.ReadCloser, error)
	// WriteFile creates or truncates path with mode, creating parent
	// directories when mkdirs is set.
	WriteFile(ctx context.Context, path string, r io.Reader, mode fs.FileMode, mkdirs bool) error
	Stat(ctx context.Context, path string) (FileInfo, error)
	List(ctx context.Context, path string) ([]FileInfo, error)
	Mkdir(ctx context.Context, path string, mode fs.FileMode, parents bool) error
	Remove(ctx context.Context, path string, recursive bool) error
	Rename(ctx context.Context, from, to string) error
}

// FileInfo describes one file inside a sandbox.
type FileInfo struct {
	Name    string      `json:"name"`
	Path    string      `json:"path"`
	Size    int64       `json:"size"`
	Mode    fs.FileMode `json:"mode"`
	ModTime time.Time   `json:"mod_time"`
	IsDir   bool        `json:"is_dir"`
	Link    string      `json:"link,omitempty"` // symlink target, not followed
	// Owner, when the backend knows it (nil: it does not, as on wasm).
	Owner *FileOwner `json:"owner,omitempty"`
	// Metadata is the file's metadata (see MetadataFiles), nil when it has
	// none or the backend keeps none.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// FileOwner is a file's owner and group as the sandbox sees them: ids
// and their names in the sandbox's /etc/passwd and /etc/group (empty
// when not there).
type FileOwner struct {
	UID   int    `json:"uid"`
	GID   int    `json:"gid"`
	User  string `json:"user,omitempty"`
	Group string `json:"group,omitempty"`
}

// Stats is a sandbox's resource use.
type Stats struct {
	MemoryPeakBytes int64 `json:"memory_peak_bytes"`
	MemoryBytes     int64 `json:"memory_bytes"`
	Pids            int   `json:"pids"`
	CPUNanos        int64 `json:"cpu_nanos"`
	Violations      int   `json:"violations"`
}

// Signal numbers used across backends (Linux values; wasm maps them).
const (
	SIGINT  = 2
	SIGKILL = 9
	SIGTERM = 15
)

// RuntimeReporter is implemented by sandboxes that can say how they run
// beyond their backend's name (gVisor: the runsc version and the
// platform it intercepts system calls with): short key/value facts for
// a sandbox's description (the API's "runtime"). It is fixed at create
// and cheap to call.
type RuntimeReporter interface {
	Runtime() map[string]string
}

// HostIdentity is implemented by sandboxes whose processes run as host ids
// of their own (a leased range, see backend.Options.HostIDs): a caller that
// makes host files for the sandbox (a server's workspace) gives them to
// these ids, since the sandbox may not write what host root owns.
type HostIdentity interface {
	HostIDs() (uid, gid int)
}
