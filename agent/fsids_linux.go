package agent

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/sandbox"
)

// asUser runs fn with the filesystem identity processes get (GuestConfig
// UID/GID, no supplementary groups), so file operations through the API
// are checked and owned like a process's: a file written for the host is
// the sandbox user's, and what that user may not touch, the API may not
// either. The identity is per thread (setfsuid/setfsgid and a raw
// setgroups), so fn runs on a locked thread; when the thread's identity
// cannot be restored it is never unlocked and dies with the goroutine.
// Nothing is switched when no identity is configured.
func (g *guest) asUser(fn func()) error {
	g.mu.Lock()
	cfg := g.cfg
	noSetgroups := g.noSetgroups
	g.mu.Unlock()
	uid, gid := -1, -1
	if cfg != nil {
		uid, gid = cfg.UID, cfg.GID
	}
	if uid < 0 && gid < 0 {
		fn()
		return nil
	}
	runtime.LockOSThread()
	var groups []int
	if !noSetgroups {
		var err error
		if groups, err = unix.Getgroups(); err != nil {
			runtime.UnlockOSThread()
			return fmt.Errorf("file operation as %d:%d: get groups: %v: %w", uid, gid, err, sandbox.ErrPermission)
		}
	}
	prevUID, prevGID := -1, -1
	ok := true
	if !noSetgroups {
		ok = setThreadGroups(nil) == nil
	}
	if ok && gid >= 0 {
		prevGID, _ = unix.SetfsgidRetGid(gid)
		cur, _ := unix.SetfsgidRetGid(-1)
		ok = cur == gid
	}
	if ok && uid >= 0 {
		prevUID, _ = unix.SetfsuidRetUid(uid)
		cur, _ := unix.SetfsuidRetUid(-1)
		ok = cur == uid
	}
	if ok {
		fn()
	}
	restored := true
	if prevUID >= 0 {
		unix.SetfsuidRetUid(prevUID)
		cur, _ := unix.SetfsuidRetUid(-1)
		restored = restored && cur == prevUID
	}
	if prevGID >= 0 {
		unix.SetfsgidRetGid(prevGID)
		cur, _ := unix.SetfsgidRetGid(-1)
		restored = restored && cur == prevGID
	}
	if !noSetgroups && setThreadGroups(groups) != nil {
		restored = false
	}
	if restored {
		runtime.UnlockOSThread()
	}
	if !ok {
		return fmt.Errorf("file operation as %d:%d: cannot take that identity: %w", uid, gid, sandbox.ErrPermission)
	}
	return nil
}

// setThreadGroups sets the calling thread's supplementary groups only:
// x/sys's Setgroups is the raw per-thread syscall (the syscall package's
// changes every thread of the process).
func setThreadGroups(groups []int) error { return unix.Setgroups(groups) }
