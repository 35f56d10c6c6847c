//go:build !linux

package agent

// PrepareSpawnThread is only available on Linux.
func PrepareSpawnThread(setup func() error) error { return ErrServeUnsupported }
