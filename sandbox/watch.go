package sandbox

import "context"

// File event operations (FileEvent.Op).
const (
	FileCreate   = "create"
	FileWrite    = "write"
	FileRemove   = "remove"
	FileRename   = "rename"
	FileOverflow = "overflow" // events were dropped (a bound was reached); Path is empty
)

// FileEvent is one change in a sandbox's filesystem, as the sandbox sees
// it. Paths are sandbox paths.
type FileEvent struct {
	Op   string `json:"op"`
	Path string `json:"path,omitempty"`
	From string `json:"from,omitempty"` // rename: the old path
	Dir  bool   `json:"dir,omitempty"`  // the entry is a directory
}

// FileWatcher is implemented by sandboxes whose agent can watch their
// filesystem (inotify in the guest). WatchFiles returns once path is
// watched (ErrNotFound for a missing one): the changes under it (the
// directory's entries; with recursive, its whole tree; or the file itself)
// come from Next until ctx ends, Close is called, the watched path goes
// away (io.EOF) or the sandbox ends (ErrClosed). Events are bounded: past
// a bound some are dropped and an overflow event says so.
type FileWatcher interface {
	WatchFiles(ctx context.Context, path string, recursive bool) (FileEvents, error)
}

// FileEvents is a running watch. Next is not safe for concurrent use;
// Close may be called from anywhere, more than once.
type FileEvents interface {
	Next() (FileEvent, error)
	Close() error
}
