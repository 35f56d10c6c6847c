package agent

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/internal/userspec"
	"github.com/airlock-dev/airlock/sandbox"
)

// canSwitchUsers reports whether this process may take other ids: it
// holds CAP_SETUID and CAP_SETGID (in its own user namespace).
func canSwitchUsers() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	const want = 1<<unix.CAP_SETUID | 1<<unix.CAP_SETGID
	return data[0].Effective&want == want
}

// readSmall is the first MiB of file p of this root (nil if unreadable).
func (g *guest) readSmall(p string) []byte {
	fd, err := g.root.open(p, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	return b
}

// idNameMaps names file owners and groups as this root's /etc/passwd and
// /etc/group do.
type idNameMaps struct{ users, groups map[int]string }

// idNames reads the databases anew (a stat or a listing reads them once):
// the sandbox may change them at any time.
func (g *guest) idNames() idNameMaps {
	u, gr := userspec.Names(bytes.NewReader(g.readSmall("/etc/passwd")), bytes.NewReader(g.readSmall("/etc/group")))
	return idNameMaps{u, gr}
}

// name sets info's owner and group names (empty when not in the databases).
func (m idNameMaps) name(info *wireFileInfo) {
	info.Owner, info.Group = m.users[int(info.UID)], m.groups[int(info.GID)]
}

// userCredential resolves an exec's user (USER[:GROUP]) with this root's
// own /etc/passwd and /etc/group. A process can only run as a user the
// sandbox is allowed to be: a sandbox whose processes hold no capability
// to change users (every sandbox but a native image sandbox's root with
// its own id range) runs others' requests only when they name its own
// user.
func (g *guest) userCredential(spec string, def *syscall.Credential) (*syscall.Credential, error) {
	u, err := userspec.Resolve(spec, bytes.NewReader(g.readSmall("/etc/passwd")), bytes.NewReader(g.readSmall("/etc/group")))
	if err != nil {
		return nil, fmt.Errorf("exec as %q: %w", spec, err)
	}
	cur := def
	if cur == nil {
		cur = &syscall.Credential{Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())}
	}
	if uint32(u.UID) == cur.Uid && uint32(u.GID) == cur.Gid {
		return def, nil // already who it asks for
	}
	if canSwitchUsers() {
		// Root inside with its capabilities (a native image sandbox with
		// its own id range): the child takes the user's ids, and loses
		// every capability with its uid.
		g.mu.Lock()
		noSetgroups := g.noSetgroups
		g.mu.Unlock()
		return &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: []uint32{}, NoSetGroups: noSetgroups}, nil
	}
	return nil, fmt.Errorf("exec as %q (uid %d, gid %d): this sandbox runs as %d:%d and cannot switch users (it holds no capability over other ids; a sandbox with root inside and its own id range can): %w",
		spec, u.UID, u.GID, cur.Uid, cur.Gid, sandbox.ErrPermission)
}
