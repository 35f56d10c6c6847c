package docker

import (
	"context"

	"github.com/airlock-dev/airlock/sandbox"
)

// WatchFiles streams filesystem events under p through the agent
// (inotify in the guest). See sandbox.FileWatcher.
func (s *dockerSandbox) WatchFiles(ctx context.Context, p string, recursive bool) (sandbox.FileEvents, error) {
	if s.Closed() {
		return nil, s.ClosedErr("watch")
	}
	return s.Client.Watch(ctx, p, recursive)
}
