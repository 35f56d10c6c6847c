package api

import "time"

// ForkRequest is the body of POST /v1/sandboxes/{id}/fork and of POST
// /v1/snapshots/{snapshot}/sandboxes (optional): how many sandboxes to
// make and what differs from their source's settings.
type ForkRequest struct {
	// Count is how many sandboxes to make (default 1, at most MaxForkCount).
	Count int `json:"count,omitempty"`
	// Timeout is each new sandbox's timeout (default: its source's).
	Timeout Duration `json:"timeout,omitempty"`
	// Labels are set over the source's labels ("" removes one).
	Labels map[string]string `json:"labels,omitempty"`
}

// MaxForkCount bounds one fork's copies.
const MaxForkCount = 64

// Copy methods (CopyReport.Method).
const (
	CopyReflink = "reflink" // the files share their blocks with their source until written
	CopyFull    = "copy"    // the data was copied (holes kept): the filesystem has no reflinks
	CopyMixed   = "mixed"   // some files of each
)

// CopyReport says how a fork or snapshot copied a sandbox's files.
type CopyReport struct {
	// Method is CopyReflink, CopyFull or CopyMixed ("" when there were no
	// files with data).
	Method string `json:"method,omitempty"`
	// Files and Bytes are the regular files copied and their sizes, per
	// copy; Skipped the entries left out (sockets, fifos, devices).
	Files   int   `json:"files"`
	Bytes   int64 `json:"bytes"`
	Skipped int   `json:"skipped,omitempty"`
	// Millis is how long copying took, all copies together.
	Millis int64 `json:"millis"`
}

// ForkResult is the answer of a fork and of a create from a snapshot:
// every sandbox made (all or none) and how their files were copied.
type ForkResult struct {
	Sandboxes []Sandbox  `json:"sandboxes"`
	Copy      CopyReport `json:"copy"`
}

// SnapshotRequest is the body of POST /v1/sandboxes/{id}/snapshots
// (optional).
type SnapshotRequest struct {
	Name string `json:"name,omitempty"`
}

// Snapshot is a sandbox's files (its workspace and, for an image
// sandbox, its writable layer) and settings, kept apart from it:
// sandboxes are created from it after the sandbox is gone. Memory is
// not kept.
type Snapshot struct {
	ID        string    `json:"id"`
	Name      string    `json:"name,omitempty"`
	Sandbox   string    `json:"sandbox"` // the sandbox it was taken of
	Backend   string    `json:"backend"`
	Image     string    `json:"image,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Files and Bytes are its regular files and their sizes (what it
	// counts against the tenant's checkpoint quota).
	Files int        `json:"files"`
	Bytes int64      `json:"bytes"`
	Copy  CopyReport `json:"copy"`
}

// SnapshotList is the answer of GET /v1/snapshots.
type SnapshotList struct {
	Snapshots []Snapshot `json:"snapshots"`
}
