package sandbox

import "context"

// Freezer is implemented by sandboxes whose processes can be frozen in
// place, memory kept, and thawed (the cgroup freezer). While frozen no
// process of the sandbox runs, its agent included: callers must not send
// it requests. Freeze and Thaw are idempotent; Destroy works frozen.
type Freezer interface {
	// Freeze stops every process and returns once all are frozen.
	Freeze(ctx context.Context) error
	// Thaw lets them run again.
	Thaw(ctx context.Context) error
}
