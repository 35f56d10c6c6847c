// Package api holds the wire types of Airlock's /v1 HTTP API, shared by the
// server and the Go SDK, the one table between error kinds and the API's
// error codes, and the OpenAPI document that describes it all. It must
// never contain behaviour beyond encoding (no I/O, no policy) and never
// import the core packages: the SDK builds on it alone, with no YAML or
// IDNA code in its import graph.
package api

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"time"
)

// OpenAPI is the OpenAPI 3 document of the /v1 API (api/openapi.yaml).
//
//go:embed openapi.yaml
var OpenAPI []byte

// Duration is a time.Duration written as a Go duration string ("30s").
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes d as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string ("90s", "5m").
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string such as \"30s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("duration %q: want a non-negative Go duration such as \"30s\"", s)
	}
	*d = Duration(v)
	return nil
}

// CreateSandboxRequest is the body of POST /v1/sandboxes.
type CreateSandboxRequest struct {
	// Backend: native, gvisor, wasm, ...; empty means the server's default.
	Backend string `json:"backend,omitempty"`
	// Profile names a built-in policy profile; empty means "default".
	Profile string `json:"profile,omitempty"`
	// Policy is an inline policy (the YAML policy's fields as JSON), layered
	// on Profile. Host paths, secrets and env pass-through are refused over
	// an API key.
	Policy json.RawMessage `json:"policy,omitempty"`
	// Image is the root filesystem: a name under the server's image directory.
	Image string `json:"image,omitempty"`
	// Timeout is the lifetime; the sandbox is destroyed then unless kept alive.
	Timeout   Duration          `json:"timeout,omitempty"`
	KeepAlive bool              `json:"keep_alive,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	// Env is added to every process's environment.
	Env map[string]string `json:"env,omitempty"`
	// Volumes are the tenant's named volumes mounted into the sandbox.
	Volumes []VolumeMount `json:"volumes,omitempty"`

	// KeepAliveWhile is keep_alive's object form ({"while": "processes"}):
	// the sandbox does not expire while a background process runs
	// (api/lifecycle.go encodes it in keep_alive).
	KeepAliveWhile *KeepAliveSpec `json:"-"`
	// AutoResume: a request to the sandbox while it is paused resumes it.
	AutoResume bool `json:"auto_resume,omitempty"`
	// PublicPorts lets requests without credentials reach the sandbox's
	// ports (the port proxy and preview hosts): E2B's public traffic.
	PublicPorts bool `json:"public_ports,omitempty"`
	// OnTimeout is what the sandbox's timeout does: "destroy" (default)
	// or "pause" (its processes are frozen, memory kept, and it is kept
	// alive until resumed or deleted).
	OnTimeout string `json:"on_timeout,omitempty"`
	// AccessTokens are the scopes (TokenScopeSandbox, TokenScopePorts)
	// whose access tokens the answer carries in Sandbox.AccessTokens:
	// the tokens POST /v1/sandboxes/{id}/access-tokens would hand out,
	// without its round trip. A scope that is not one of these refuses
	// the create; the sandbox is made only when every scope is valid.
	AccessTokens []string `json:"access_tokens,omitempty"`
}

// OnTimeout values.
const (
	OnTimeoutDestroy = "destroy"
	OnTimeoutPause   = "pause"
)

// Sandbox describes a sandbox.
type Sandbox struct {
	ID        string            `json:"id"`
	Backend   string            `json:"backend"`
	Profile   string            `json:"profile,omitempty"`
	Image     string            `json:"image,omitempty"`
	State     string            `json:"state"` // running, frozen, paused, stopped
	Reason    string            `json:"reason,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	KeepAlive bool              `json:"keep_alive"`
	Pooled    bool              `json:"pooled,omitempty"` // came from a warm pool
	Workdir   string            `json:"workdir,omitempty"`
	MemoryMax int64             `json:"memory_max_bytes,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	ExpiresAt time.Time         `json:"expires_at,omitzero"`
	EndedAt   time.Time         `json:"ended_at,omitzero"`
	Policy    json.RawMessage   `json:"policy,omitempty"`
	Stats     *Stats            `json:"stats,omitempty"`
	// KeepAliveWhile is "processes" for keep_alive {"while": "processes"}.
	KeepAliveWhile string `json:"keep_alive_while,omitempty"`
	AutoResume     bool   `json:"auto_resume,omitempty"`
	PublicPorts    bool   `json:"public_ports,omitempty"`
	OnTimeout      string `json:"on_timeout,omitempty"`
	// Env is what the create request added to every process's
	// environment (GET of one sandbox only).
	Env map[string]string `json:"env,omitempty"`
	// Verified says a resumed sandbox's files matched the manifest its
	// pause recorded (false after a crash: nothing was recorded).
	Verified bool `json:"verified,omitempty"`
	// Runtime is how the sandbox runs where its backend says more than
	// its name (gvisor: runsc_version, platform).
	Runtime map[string]string `json:"runtime,omitempty"`
	// AccessTokens are the tokens of the scopes the create asked for
	// (CreateSandboxRequest.AccessTokens), in its order: in the answer
	// of the create only, never in a get or a list.
	AccessTokens []AccessToken `json:"access_tokens,omitempty"`
}

// Stats is a sandbox's resource use so far.
type Stats struct {
	MemoryPeakBytes int64 `json:"memory_peak_bytes"`
	MemoryBytes     int64 `json:"memory_bytes"`
	Pids            int   `json:"pids"`
	CPUNanos        int64 `json:"cpu_nanos"`
	Violations      int   `json:"violations"`
}

// SandboxList is the answer of GET /v1/sandboxes.
type SandboxList struct {
	Sandboxes []Sandbox `json:"sandboxes"`
}

// PatchSandboxRequest changes a sandbox's lifetime: Timeout counts from now.
type PatchSandboxRequest struct {
	Timeout   *Duration `json:"timeout,omitempty"`
	KeepAlive *bool     `json:"keep_alive,omitempty"`
}

// NetworkRequest replaces a running sandbox's network rules (PUT
// /v1/sandboxes/{id}/network). Only from outside; audited.
type NetworkRequest struct {
	Mode  string   `json:"mode"`
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	// Requests, when present, replaces the sandbox's HTTP request rules
	// (an empty list removes them); absent keeps them. The whole change is
	// checked before any of it applies.
	Requests *[]RequestRule `json:"requests,omitempty"`
}

// RequestRule is one HTTP request rule (policy network.requests; see
// docs/egress.md, "Request rules").
type RequestRule struct {
	Host     string            `json:"host"`
	Methods  []string          `json:"methods,omitempty"`
	Path     string            `json:"path,omitempty"`
	Query    map[string]string `json:"query,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`
	Action   string            `json:"action,omitempty"`
	Programs []string          `json:"programs,omitempty"`
}

// ExecRequest is the body of POST /v1/sandboxes/{id}/exec.
type ExecRequest struct {
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env,omitempty"`
	Dir     string            `json:"dir,omitempty"`
	Timeout Duration          `json:"timeout,omitempty"`
	// User runs the process as USER[:GROUP]: names from the sandbox's
	// own /etc/passwd (an image's), or uid:gid. Empty: the sandbox's.
	User string `json:"user,omitempty"`
	// Stdin is the whole input (bytes, base64 in JSON). For streamed input
	// start a background process with StdinStream and POST to its stdin.
	Stdin []byte `json:"stdin,omitempty"`
	// Background starts the process and returns at once (201, a Process);
	// its output is kept in a bounded buffer to read or follow later.
	Background bool `json:"background,omitempty"`
	// StdinStream keeps a background process's stdin open for
	// POST .../processes/{pid}/stdin.
	StdinStream bool `json:"stdin_stream,omitempty"`
	// Encoding of output in answers: "base64" (default, binary-safe) or
	// "text" (invalid UTF-8 replaced).
	Encoding string `json:"encoding,omitempty"`
}

// ExitStatus is how a process ended.
type ExitStatus struct {
	Code      int  `json:"exit_code"`                  // exit code, or 128+signal
	Signal    int  `json:"signal,omitempty"`           // terminating signal, 0 if exited
	TimedOut  bool `json:"timed_out,omitempty"`        // killed by the wall timeout
	OOM       bool `json:"oom,omitempty"`              // killed by the memory limit
	Truncated bool `json:"output_truncated,omitempty"` // output hit the limit
}

// ExecResult is the buffered answer of an exec.
type ExecResult struct {
	ExitStatus
	Encoding string `json:"encoding"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	// DurationMS is the process's wall time in milliseconds.
	DurationMS float64 `json:"duration_ms"`
}

// Frame types of streamed output.
const (
	FrameStdout  = "stdout"
	FrameStderr  = "stderr"
	FrameExit    = "exit"
	FrameError   = "error"
	FrameDropped = "dropped" // the output buffer overflowed; Offset says where it resumes
	FrameStart   = "start"
)

// Frame is one line of a streamed (NDJSON or SSE) exec or process output.
type Frame struct {
	Type string `json:"type"`
	// Data is the chunk as base64 (encoding=base64), Text as text.
	Data []byte `json:"data,omitempty"`
	Text string `json:"text,omitempty"`
	// Offset is the byte offset of this chunk in the process's combined
	// output (for reconnecting: ?offset=).
	Offset int64       `json:"offset"`
	PID    int         `json:"pid,omitempty"`
	Exit   *ExitStatus `json:"exit,omitempty"`
	Error  *ErrorInfo  `json:"error,omitempty"`
}

// Process describes a background process.
type Process struct {
	ID        string      `json:"id"`
	PID       int         `json:"pid"`
	Args      []string    `json:"args"`
	Running   bool        `json:"running"`
	Exit      *ExitStatus `json:"exit,omitempty"`
	StartedAt time.Time   `json:"started_at"`
	EndedAt   time.Time   `json:"ended_at,omitzero"`
	// OutputBytes is the total output produced; the buffer keeps the tail.
	OutputBytes int64 `json:"output_bytes"`
}

// ProcessList is the answer of GET .../processes.
type ProcessList struct {
	Processes []Process `json:"processes"`
}

// SignalRequest sends a signal (Linux number; default SIGKILL).
type SignalRequest struct {
	Signal int `json:"signal,omitempty"`
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
	// UID and GID own the file as the sandbox sees them; Owner and Group
	// are their names in its /etc/passwd and /etc/group ("" when not
	// there). All four are absent where the backend does not know them
	// (wasm).
	UID   *int   `json:"uid,omitempty"`
	GID   *int   `json:"gid,omitempty"`
	Owner string `json:"owner,omitempty"`
	Group string `json:"group,omitempty"`
	// Metadata is the file's user metadata (extended attributes
	// user.e2b.KEY), absent when it has none.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// FileList is the answer of a directory listing.
type FileList struct {
	Files []FileInfo `json:"files"`
}

// RenameRequest renames From to To inside the sandbox.
type RenameRequest struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// MkdirRequest creates a directory.
type MkdirRequest struct {
	Path    string `json:"path"`
	Mode    uint32 `json:"mode,omitempty"`
	Parents bool   `json:"parents,omitempty"`
}

// PTYStart is the first (text) WebSocket message on .../pty.
type PTYStart struct {
	Args []string          `json:"args"`
	Env  map[string]string `json:"env,omitempty"`
	Dir  string            `json:"dir,omitempty"`
	Rows uint16            `json:"rows,omitempty"`
	Cols uint16            `json:"cols,omitempty"`
	// Timeout bounds the process's wall time; zero means the server's.
	Timeout Duration `json:"timeout,omitempty"`
	// User runs it as USER[:GROUP], as ExecRequest.User.
	User string `json:"user,omitempty"`
}

// PTYMessage is a later text message in either direction: "resize" from
// the client, "start" (with PID, once the process runs), "exit" (with
// Exit) or "error" from the server. Binary messages carry terminal bytes.
type PTYMessage struct {
	Type  string      `json:"type"`
	PID   int         `json:"pid,omitempty"`
	Rows  uint16      `json:"rows,omitempty"`
	Cols  uint16      `json:"cols,omitempty"`
	Exit  *ExitStatus `json:"exit,omitempty"`
	Error *ErrorInfo  `json:"error,omitempty"`
}

// Event is one stored audit event.
type Event struct {
	Seq     int64          `json:"seq"`
	Time    time.Time      `json:"time"`
	Sandbox string         `json:"sandbox"`
	Type    string         `json:"type"`
	Message string         `json:"message,omitempty"`
	Fields  map[string]any `json:"fields,omitempty"`
}

// EventList is the answer of GET .../events without follow.
type EventList struct {
	Events []Event `json:"events"`
}

// Health is the answer of GET /healthz.
type Health struct {
	// Status is "ok", or "degraded" when the server refuses new work
	// (Storage says why).
	Status   string           `json:"status"`
	Backends map[string]Probe `json:"backends"`
	Storage  string           `json:"storage,omitempty"`
}

// Probe is a backend's self-assessment on the server's host.
type Probe struct {
	Available bool              `json:"available"`
	Reason    string            `json:"reason,omitempty"` // why not, and what to install
	Isolation string            `json:"isolation"`        // kernel, medium, weak, hardware, wasm
	Details   map[string]string `json:"details,omitempty"`
}

// ErrorBody is every error answer's body.
type ErrorBody struct {
	Error ErrorInfo `json:"error"`
}

// ErrorInfo says what went wrong; Code is stable and machine-readable.
type ErrorInfo struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// PortTokenRequest asks for a token that lets a browser (no API key)
// reach one port of a sandbox until it expires.
type PortTokenRequest struct {
	Port int      `json:"port"`
	TTL  Duration `json:"ttl,omitempty"` // 1s..24h; default 15m
}

// PortToken is a minted port token and the URLs that carry it.
type PortToken struct {
	Port  int    `json:"port"`
	Token string `json:"token"`
	// URL is the path-routed URL with the token, relative to the server.
	URL string `json:"url"`
	// PreviewURL is the host-routed URL, when the server has a preview domain.
	PreviewURL string    `json:"preview_url,omitempty"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// UploadTempPrefix begins the name of the hidden sibling a file upload
// (PUT .../files) is written to before it is renamed into place: watches
// see the upload as that file's create and write, then a rename.
const UploadTempPrefix = ".airlock-upload-"

// FileEvent is one change inside a sandbox (GET .../files/watch): op is
// create, write, remove, rename (with from) or overflow (events were
// dropped; no path).
type FileEvent struct {
	Op   string `json:"op"`
	Path string `json:"path,omitempty"`
	From string `json:"from,omitempty"`
	Dir  bool   `json:"dir,omitempty"`
}

// VolumeMount mounts named volume Name at Path inside a sandbox.
type VolumeMount struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// CreateVolumeRequest makes a named volume of SizeBytes (its quota).
type CreateVolumeRequest struct {
	Name      string `json:"name"`
	SizeBytes int64  `json:"size_bytes"`
}

// Volume is a tenant's named, persistent volume.
type Volume struct {
	Name      string    `json:"name"`
	SizeBytes int64     `json:"size_bytes"`
	CreatedAt time.Time `json:"created_at"`
	// InUse lists the live sandboxes that mount it.
	InUse []string `json:"in_use,omitempty"`
}

// VolumeList is the answer of GET /v1/volumes.
type VolumeList struct {
	Volumes []Volume `json:"volumes"`
}
