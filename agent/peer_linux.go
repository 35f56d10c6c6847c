package agent

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/sandbox"
)

// identifyPeer names the program behind conn, a connection accepted on the
// egress listener: the peer socket's inode (from /proc/net/tcp), every
// process holding it (from /proc/PID/fd), and for each its executable,
// checked so that what a sandbox process can change does not count (see
// verifyHolder). All holders must agree. Any doubt leaves Program empty,
// with the reason; the host then refuses rules that name programs.
//
// It runs on the spawn thread, the thread every process the agent starts
// is forked from. Reading another process's fd links, exe and maps passes
// the kernel's ptrace access check, and Landlock's part of it allows a
// thread only into processes of its own domain or one nested in it. Where
// the backend applied Landlock thread by thread (the native backend before
// Landlock ABI 8: each thread's landlock_restrict_self makes a domain of
// its own, unrelated to its siblings'), only the spawn thread's domain is
// the one the sandbox's processes descend from; from any other thread the
// reads fail with EACCES. Being there also orders the check after every
// spawn the agent has started (a child between fork and exec is still the
// non-dumpable agent, whose descriptors cannot be read).
func identifyPeer(conn net.Conn) sandbox.EgressPeer {
	var prog string
	var err error
	if serr := onSpawnThread(func() { prog, err = peerProgram("/proc", conn) }); serr != nil {
		err = serr
	}
	if err != nil {
		return sandbox.EgressPeer{Unverified: err.Error()}
	}
	return sandbox.EgressPeer{Program: prog}
}

func peerProgram(proc string, conn net.Conn) (string, error) {
	la, ok1 := conn.LocalAddr().(*net.TCPAddr)
	ra, ok2 := conn.RemoteAddr().(*net.TCPAddr)
	if !ok1 || !ok2 || la.IP.To4() == nil || ra.IP.To4() == nil {
		return "", errors.New("not an IPv4 TCP connection")
	}
	ino, err := diagInode(ra, la)
	if err != nil {
		// No sock_diag (gVisor's netstack): its /proc table is its own.
		if ino, err = socketInode(filepath.Join(proc, "self/net/tcp"), ra, la); err != nil {
			return "", err
		}
	}
	holders, err := socketHolders(proc, ino)
	if err != nil {
		return "", err
	}
	if len(holders) == 0 {
		return "", errors.New("no process holds the connection (it exited)")
	}
	prog := ""
	for _, pid := range holders {
		p, err := verifyHolder(proc, pid)
		if err != nil {
			return "", fmt.Errorf("process %d: %w", pid, err)
		}
		if prog != "" && p != prog {
			return "", fmt.Errorf("the connection is held by two programs (%s, %s)", prog, p)
		}
		prog = p
	}
	return prog, nil
}

// tcpAddrHex is an IPv4 address and port as /proc/net/tcp prints them.
func tcpAddrHex(a *net.TCPAddr) string {
	return fmt.Sprintf("%08X:%04X", binary.NativeEndian.Uint32(a.IP.To4()), a.Port)
}

// socketInode finds the inode of the socket whose local address is local
// and remote address remote.
func socketInode(table string, local, remote *net.TCPAddr) (string, error) {
	data, err := os.ReadFile(table)
	if err != nil {
		return "", fmt.Errorf("read socket table: %w", err)
	}
	l, r := tcpAddrHex(local), tcpAddrHex(remote)
	for _, line := range bytes.Split(data, []byte("\n"))[1:] {
		f := strings.Fields(string(line))
		if len(f) >= 10 && f[1] == l && f[2] == r && f[9] != "0" {
			return f[9], nil
		}
	}
	return "", fmt.Errorf("peer socket %s not found", local)
}

// socketHolders lists the processes (other than this one) with an open
// descriptor for socket inode ino. A process whose descriptor list cannot
// be read is an error; one whose links cannot be read is passed over.
func socketHolders(proc, ino string) ([]int, error) {
	ents, err := os.ReadDir(proc)
	if err != nil {
		return nil, err
	}
	want, self := "socket:["+ino+"]", os.Getpid()
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		fds, err := os.ReadDir(filepath.Join(proc, e.Name(), "fd"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cannot inspect process %d: %w", pid, err)
		}
		for _, fd := range fds {
			// A link that cannot be read (a non-dumpable process, or one
			// in another user namespace) is not counted: see "What this
			// proves" in docs/egress.md.
			if l, _ := os.Readlink(filepath.Join(proc, e.Name(), "fd", fd.Name())); l == want {
				out = append(out, pid)
				break
			}
		}
	}
	return out, nil
}

// verifyHolder returns the path of pid's executable when nothing about it
// is in the sandbox's hands: the path still names the very file the
// process runs (not deleted or replaced), that file and its directory are
// not writable by the process (a read-only mount, or owned by another user
// without group/other write), every file mapped executable (shared
// libraries, an LD_PRELOAD) passes the same test, and no tracer is
// attached. argv[0] and the name a symlink gave are never read.
func verifyHolder(proc string, pid int) (string, error) {
	dir := filepath.Join(proc, strconv.Itoa(pid))
	uid, tracer, err := procStatus(dir)
	if err != nil {
		return "", err
	}
	if tracer != 0 {
		return "", fmt.Errorf("traced by process %d", tracer)
	}
	exe, err := os.Readlink(filepath.Join(dir, "exe"))
	if err != nil {
		return "", fmt.Errorf("read executable: %w", err)
	}
	var run unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, "exe"), &run); err != nil {
		return "", fmt.Errorf("stat executable: %w", err)
	}
	if err := trustedFile(exe, run.Dev, run.Ino, uid); err != nil {
		return "", err
	}
	maps, err := os.ReadFile(filepath.Join(dir, "maps"))
	if err != nil {
		return "", fmt.Errorf("read mappings: %w", err)
	}
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.Contains(f[1], "x") || !strings.HasPrefix(f[5], "/") {
			continue // anonymous code (a JIT) is the program's own doing
		}
		ino, _ := strconv.ParseUint(f[4], 10, 64)
		if err := trustedFile(strings.Join(f[5:], " "), 0, ino, uid); err != nil {
			return "", fmt.Errorf("mapped code: %w", err)
		}
	}
	return exe, nil
}

// trustedFile checks that path is the file (dev, ino) (dev 0: any) and
// that neither it nor its directory can be written by uid.
func trustedFile(path string, dev, ino uint64, uid uint32) error {
	if strings.HasSuffix(path, " (deleted)") || !filepath.IsAbs(path) {
		return fmt.Errorf("%s: deleted or not a path", path)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if st.Ino != ino || dev != 0 && st.Dev != dev {
		return fmt.Errorf("%s: not the file the process runs (replaced)", path)
	}
	if err := notWritable(path, &st, uid); err != nil {
		return err
	}
	var dst unix.Stat_t
	d := filepath.Dir(path)
	if err := unix.Stat(d, &dst); err != nil {
		return fmt.Errorf("%s: %w", d, err)
	}
	return notWritable(d, &dst, uid)
}

func notWritable(path string, st *unix.Stat_t, uid uint32) error {
	var fsst unix.Statfs_t
	if err := unix.Statfs(path, &fsst); err == nil && fsst.Flags&unix.ST_RDONLY != 0 {
		return nil
	}
	switch {
	case uid == 0:
		return fmt.Errorf("%s: on a writable mount and the process is root", path)
	case st.Uid == uid:
		return fmt.Errorf("%s: owned by the process's user", path)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("%s: group or other writable", path)
	}
	return nil
}

// procStatus reads the effective uid and TracerPid of a process.
func procStatus(dir string) (uid uint32, tracer int, err error) {
	data, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return 0, 0, fmt.Errorf("read status: %w", err)
	}
	uidSeen := false
	for _, line := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		switch {
		case k == "Uid" && len(f) >= 2:
			u, err := strconv.ParseUint(f[1], 10, 32)
			if err != nil {
				return 0, 0, fmt.Errorf("bad Uid line")
			}
			uid, uidSeen = uint32(u), true
		case k == "TracerPid" && len(f) == 1:
			tracer, _ = strconv.Atoi(f[0])
		}
	}
	if !uidSeen {
		return 0, 0, errors.New("no Uid in status")
	}
	return uid, tracer, nil
}
