package fsguard

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/internal/mountinfo"
	"github.com/airlock-dev/airlock/policy"
)

// Notif mirrors struct seccomp_notif.
type Notif struct {
	ID    uint64
	Pid   uint32 // the calling thread, in the host's pid namespace
	Flags uint32
	Nr    int32
	Arch  uint32
	IP    uint64
	Args  [6]uint64
}

// Response mirrors struct seccomp_notif_resp.
type Response struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

type addFD struct {
	ID         uint64
	Flags      uint32
	SrcFD      uint32
	NewFD      uint32
	NewFDFlags uint32
}

// Config is what a Mediator needs; see New.
type Config struct {
	// Pid is the sandbox's init (its root is every sandboxed process's).
	Pid int
	// Mounts are the paths inside the sandbox of the host-backed writable
	// mounts; every writable mount at or below one of them is mediated,
	// except Private ones (the sandbox's own tmpfs and files).
	Mounts  []string
	Private []string
	// Guard decides; nil refuses nothing but set-id bits.
	Guard *policy.ConfigGuard
	// Creds are the sandbox's host credentials.
	Creds Creds
	// Listener is the seccomp listener (for ADDFD).
	Listener int
	// Report receives every refusal, with the calling thread.
	Report func(d policy.Denial, tid uint32)
}

// Mediator performs a sandbox's writes to mediated mounts. Handle must be
// called from one goroutine, locked to a thread that ran PrepareThread:
// calls are decided and performed one at a time.
type Mediator struct {
	cfg    Config
	root   int
	mounts map[uint64]bool
	guard  *policy.ConfigGuard
}

// New opens the sandbox's root and finds the mediated mounts' IDs. Call it
// once the sandbox's mounts are in place and before anything untrusted
// runs (notifications wait in the kernel until Handle answers them).
func New(cfg Config) (*Mediator, error) {
	pid := strconv.Itoa(cfg.Pid)
	root, err := unix.Open("/proc/"+pid+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open sandbox root: %w", err)
	}
	ids, err := mediatedMounts("/proc/"+pid+"/mountinfo", cfg.Mounts, cfg.Private)
	if err != nil {
		unix.Close(root)
		return nil, err
	}
	g := cfg.Guard
	if g == nil {
		g = &policy.ConfigGuard{}
	}
	return &Mediator{cfg: cfg, root: root, mounts: ids, guard: g}, nil
}

// Close releases the root.
func (m *Mediator) Close() { unix.Close(m.root) }

// PrepareThread locks the calling goroutine to its thread for good and
// gives the thread the sandbox's credentials c. The goroutine must not
// return to a pool: its thread dies with it. Handle must run on it.
func PrepareThread(c Creds) error {
	runtime.LockOSThread()
	return prepareThread(c)
}

// mediatedMounts reads a mountinfo file: the IDs of writable mounts at or
// below one of roots, not at or below a private path.
func mediatedMounts(file string, roots, private []string) (map[uint64]bool, error) {
	mounts, err := mountinfo.Read(file)
	if err != nil {
		return nil, fmt.Errorf("sandbox mounts: %w", err)
	}
	ids := map[uint64]bool{}
	for _, m := range mounts {
		if under(m.Point, roots) && !under(m.Point, private) && !m.ReadOnly() {
			ids[m.ID] = true
		}
	}
	return ids, nil
}

func under(p string, roots []string) bool {
	for _, r := range roots {
		if p == r || r == "/" || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// Handles reports whether nr is one of the calls the mediator answers.
func Handles(nr int32) bool {
	switch nr {
	case unix.SYS_OPEN, unix.SYS_OPENAT, unix.SYS_CREAT, unix.SYS_OPENAT2,
		unix.SYS_MKDIR, unix.SYS_MKDIRAT, unix.SYS_MKNOD, unix.SYS_MKNODAT,
		unix.SYS_SYMLINK, unix.SYS_SYMLINKAT, unix.SYS_LINK, unix.SYS_LINKAT,
		unix.SYS_RENAME, unix.SYS_RENAMEAT, unix.SYS_RENAMEAT2, unix.SYS_TRUNCATE,
		unix.SYS_CHMOD, unix.SYS_FCHMOD, unix.SYS_FCHMODAT, unix.SYS_FCHMODAT2:
		return true
	}
	return false
}

// result of one call: answer with ret/errno, let the kernel continue, or
// already answered (fd injected with ADDFD_FLAG_SEND).
type result struct {
	ret      int64
	errno    unix.Errno
	cont     bool
	answered bool
}

var (
	cont     = result{cont: true}
	answered = result{answered: true}
)

func errResult(err error) result {
	var e unix.Errno
	if errors.As(err, &e) {
		return result{errno: e}
	}
	return result{errno: unix.EIO}
}

// Handle answers one notification (of a call Handles said yes to). It
// returns the response to send, or sent when the answer has gone already.
func (m *Mediator) Handle(n *Notif) (resp Response, sent bool) {
	t0 := time.Now()
	r := m.handle(n)
	if debugMediator {
		fmt.Fprintf(os.Stderr, "fsguard: nr=%d args=%x -> %+v in %v\n", n.Nr, n.Args[:4], r, time.Since(t0))
	}
	switch {
	case r.answered:
		return Response{}, true
	case r.cont:
		return Response{ID: n.ID, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}, false
	case r.errno != 0:
		return Response{ID: n.ID, Error: -int32(r.errno)}, false
	}
	return Response{ID: n.ID, Val: r.ret}, false
}

var debugMediator = os.Getenv("AIRLOCK_FSGUARD_DEBUG") != ""

// call is one notification being handled.
type call struct {
	m *Mediator
	n *Notif
}

func (c *call) arg(i int) uint64 { return c.n.Args[i] }
func (c *call) fd(i int) int32   { return int32(c.arg(i)) }

// str reads a NUL-terminated path argument from the caller's memory.
func (c *call) str(i int) (string, error) {
	return readString(c.n.Pid, uintptr(c.arg(i)))
}

// valid reports whether the notification still stands: the caller is still
// blocked in it (so what we read came from the right process).
func (c *call) valid() bool {
	id := c.n.ID
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(c.m.cfg.Listener), unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(&id)))
	return e == 0
}

func (m *Mediator) handle(n *Notif) result {
	c := &call{m: m, n: n}
	switch n.Nr {
	case unix.SYS_OPEN:
		return c.open(unix.AT_FDCWD, 0, int(c.arg(1)), uint32(c.arg(2)), 0)
	case unix.SYS_OPENAT:
		return c.open(c.fd(0), 1, int(c.arg(2)), uint32(c.arg(3)), 0)
	case unix.SYS_CREAT:
		return c.open(unix.AT_FDCWD, 0, unix.O_CREAT|unix.O_WRONLY|unix.O_TRUNC, uint32(c.arg(1)), 0)
	case unix.SYS_OPENAT2:
		return c.openat2()
	case unix.SYS_MKDIR:
		return c.mknod(unix.AT_FDCWD, 0, uint32(c.arg(1))|unix.S_IFDIR, 0)
	case unix.SYS_MKDIRAT:
		return c.mknod(c.fd(0), 1, uint32(c.arg(2))|unix.S_IFDIR, 0)
	case unix.SYS_MKNOD:
		return c.mknod(unix.AT_FDCWD, 0, uint32(c.arg(1)), c.arg(2))
	case unix.SYS_MKNODAT:
		return c.mknod(c.fd(0), 1, uint32(c.arg(2)), c.arg(3))
	case unix.SYS_SYMLINK:
		return c.symlink(0, unix.AT_FDCWD, 1)
	case unix.SYS_SYMLINKAT:
		return c.symlink(0, c.fd(1), 2)
	case unix.SYS_LINK:
		return c.link(unix.AT_FDCWD, 0, unix.AT_FDCWD, 1, 0)
	case unix.SYS_LINKAT:
		return c.link(c.fd(0), 1, c.fd(2), 3, int(c.arg(4)))
	case unix.SYS_RENAME:
		return c.rename(unix.AT_FDCWD, 0, unix.AT_FDCWD, 1, 0)
	case unix.SYS_RENAMEAT:
		return c.rename(c.fd(0), 1, c.fd(2), 3, 0)
	case unix.SYS_RENAMEAT2:
		return c.rename(c.fd(0), 1, c.fd(2), 3, uint(c.arg(4)))
	case unix.SYS_TRUNCATE:
		return c.truncate()
	case unix.SYS_CHMOD:
		return c.chmod(unix.AT_FDCWD, 0, uint32(c.arg(1)), 0)
	case unix.SYS_FCHMODAT:
		return c.chmod(c.fd(0), 1, uint32(c.arg(2)), 0)
	case unix.SYS_FCHMODAT2:
		return c.chmod(c.fd(0), 1, uint32(c.arg(2)), int(c.arg(3)))
	case unix.SYS_FCHMOD:
		return c.fchmod(c.fd(0), uint32(c.arg(1)))
	}
	return cont
}

// path reads path argument i and makes it absolute against dirfd.
func (c *call) path(dirfd int32, i int) (string, error) {
	p, err := c.str(i)
	if err != nil {
		return "", err
	}
	if !c.valid() {
		return "", errGone
	}
	return absolute(c.n.Pid, dirfd, p)
}

// errGone: the caller is no longer waiting (killed, or the thread died).
var errGone = errors.New("notification gone")

// fail turns a resolution error into a result: where the mediator cannot
// resolve a path (a magic link, /proc/self of a pid namespace it is not
// in, a bad pointer or descriptor), the kernel decides, with the caller's
// view, and Landlock keeps it off mediated mounts.
func fail(err error) result {
	if errors.Is(err, errGone) {
		return result{errno: unix.ENOENT}
	}
	return cont
}

func (c *call) mediated(d *dirRef) bool { return c.m.mounts[d.mnt] }

// deny reports a refusal and answers EACCES.
func (c *call) deny(d *policy.Denial) result {
	if c.m.cfg.Report != nil {
		c.m.cfg.Report(*d, c.n.Pid)
	}
	return result{errno: unix.EACCES}
}

// setID refuses set-uid/set-gid bits (the BPF filter refuses them where it
// can read the mode; openat2 passes it in memory).
func (c *call) setID(p string) result {
	return c.denyRule(policy.RuleSetID, p, "create", unix.EPERM)
}

func (c *call) denyRule(rule, p, op string, errno unix.Errno) result {
	if c.m.cfg.Report != nil {
		c.m.cfg.Report(policy.Denial{Rule: rule, Path: p, Op: op}, c.n.Pid)
	}
	return result{errno: errno}
}

func (c *call) check(op policy.GuardOp, e entry) *policy.Denial {
	g := &guardDir{fd: e.dir.fd, path: e.dir.path}
	defer g.close()
	return c.m.guard.Check(op, g, e.name)
}

// umask is the caller's file creation mask.
func (c *call) umask() uint32 {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(c.n.Pid), 10) + "/status")
	if err != nil {
		return 0o022
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			if u, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
				return uint32(u)
			}
		}
	}
	return 0o022
}

// tmpfileBit is O_TMPFILE's own bit (O_TMPFILE includes O_DIRECTORY).
const tmpfileBit = unix.O_TMPFILE &^ unix.O_DIRECTORY

// writeIntent: an open that may create or write.
const writeIntent = unix.O_WRONLY | unix.O_RDWR | unix.O_CREAT | unix.O_TRUNC | tmpfileBit

func (c *call) openat2() result {
	var how unix.OpenHow
	if c.arg(3) < unix.SizeofOpenHow {
		return cont // the kernel answers EINVAL
	}
	if err := readMem(c.n.Pid, uintptr(c.arg(2)), unsafe.Slice((*byte)(unsafe.Pointer(&how)), unix.SizeofOpenHow)); err != nil {
		return cont
	}
	if how.Flags&writeIntent == 0 {
		return cont
	}
	var extra uint64
	root := -1
	switch {
	case how.Resolve&unix.RESOLVE_BENEATH != 0:
		return cont // rare with write intent: Landlock decides (mediated mounts refuse)
	case how.Resolve&unix.RESOLVE_IN_ROOT != 0:
		// The directory is the root the caller resolves in.
		fd, err := c.openCallerFD(c.fd(0))
		if err != nil {
			return fail(err)
		}
		defer unix.Close(fd)
		root = fd
	}
	extra = how.Resolve & (unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV)
	return c.openIn(root, c.fd(0), 1, int(how.Flags), uint32(how.Mode), extra)
}

// openCallerFD opens the caller's descriptor fd as an O_PATH directory of
// ours (through its magic link: the very directory it holds).
func (c *call) openCallerFD(fd int32) (int, error) {
	p := "/proc/" + strconv.FormatUint(uint64(c.n.Pid), 10) + "/fd/" + strconv.Itoa(int(fd))
	if fd == unix.AT_FDCWD {
		p = "/proc/" + strconv.FormatUint(uint64(c.n.Pid), 10) + "/cwd"
	}
	r := -1
	err := asTracer(func() (err error) {
		r, err = unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		if fd == unix.AT_FDCWD {
			return -1, err
		}
		return -1, errResolve
	}
	return r, nil
}

func (c *call) open(dirfd int32, pathArg, flags int, mode uint32, extra uint64) result {
	return c.openIn(-1, dirfd, pathArg, flags, mode, extra)
}

// openIn opens the caller's path with flags itself when it lands on a
// mediated mount, and hands the descriptor over. root >= 0 resolves the
// path inside that directory (openat2's RESOLVE_IN_ROOT).
func (c *call) openIn(root int, dirfd int32, pathArg, flags int, mode uint32, extra uint64) result {
	if flags&writeIntent == 0 {
		return cont
	}
	creating := flags&(unix.O_CREAT|tmpfileBit) != 0
	if creating && mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
		p, _ := c.str(pathArg)
		return c.setID(p)
	}
	var abs string
	var err error
	if root >= 0 {
		abs, err = c.str(pathArg)
		if err == nil && !c.valid() {
			err = errGone
		}
		abs = "/" + abs
	} else {
		abs, err = c.path(dirfd, pathArg)
	}
	if err != nil {
		return fail(err)
	}
	tmpfile := flags&unix.O_TMPFILE == unix.O_TMPFILE
	follow := flags&unix.O_NOFOLLOW == 0 && !(flags&unix.O_CREAT != 0 && flags&unix.O_EXCL != 0) || tmpfile
	ownRoot := root < 0
	if ownRoot {
		root = c.m.root
	}
	// Inside another root (openat2 RESOLVE_IN_ROOT) a final symlink's
	// target would need that root: leave such opens to the kernel.
	e, err := lookup(root, stripSlashes(abs), follow && ownRoot, extra)
	if err != nil {
		return fail(err)
	}
	defer e.close()
	if !c.mediated(e.dir) {
		return cont
	}
	var st unix.Stat_t
	exists := unix.Fstatat(e.dir.fd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
	if exists && follow && !ownRoot && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return cont
	}
	if r, decided := c.decideOpen(e, flags, exists, &st); decided {
		return r
	}
	if creating {
		mode &= 0o7777 &^ c.umask()
	}
	cloexec := flags&unix.O_CLOEXEC != 0
	oflags := flags&^unix.O_CLOEXEC | unix.O_CLOEXEC | unix.O_NOCTTY
	if !tmpfile {
		oflags |= unix.O_NOFOLLOW
	}
	if exists && st.Mode&unix.S_IFMT == unix.S_IFIFO {
		// Opening a fifo for writing waits for a reader, which may be the
		// caller itself: do it off the mediator's thread.
		go c.m.openFIFO(*c.n, e.dir.fd, e.name, oflags, cloexec)
		return result{answered: true}
	}
	fd, err := unix.Openat(e.dir.fd, e.name, oflags, mode)
	if err == unix.EACCES && c.m.cfg.Creds.Root != nil {
		fd, err = c.openAsRoot(e, oflags, mode, exists, &st)
	}
	if err != nil {
		return errResult(err)
	}
	defer unix.Close(fd)
	return c.m.inject(c.n.ID, fd, cloexec)
}

// decideOpen asks the rules about an open of e on a mediated mount: a
// write to what exists, a create of what does not. decided with a result
// refuses (or answers as the kernel would); not decided goes ahead.
func (c *call) decideOpen(e entry, flags int, exists bool, st *unix.Stat_t) (result, bool) {
	tmpfile := flags&unix.O_TMPFILE == unix.O_TMPFILE
	readOnly := flags&unix.O_ACCMODE == unix.O_RDONLY && flags&unix.O_TRUNC == 0
	switch {
	case tmpfile:
		// An unnamed file in a directory: it only gets a name by linkat.
	case exists && st.Mode&unix.S_IFMT == unix.S_IFDIR:
		// The kernel answers EISDIR (or opens a directory O_CREAT-less).
	case exists:
		if flags&unix.O_CREAT != 0 && flags&unix.O_EXCL != 0 {
			return result{errno: unix.EEXIST}, true
		}
		if readOnly {
			break // O_CREAT on an existing file, read-only: a read
		}
		if d := c.check(policy.OpWrite, e); d != nil {
			return c.deny(d), true
		}
	case flags&unix.O_CREAT != 0:
		if d := c.check(policy.OpCreate, e); d != nil {
			return c.deny(d), true
		}
	default:
		return result{errno: unix.ENOENT}, true
	}
	return result{}, false
}

// inject installs fd in the caller as its call's result.
func (m *Mediator) inject(id uint64, fd int, cloexec bool) result {
	a := addFD{ID: id, Flags: unix.SECCOMP_ADDFD_FLAG_SEND, SrcFD: uint32(fd)}
	if cloexec {
		a.NewFDFlags = unix.O_CLOEXEC
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(m.cfg.Listener), unix.SECCOMP_IOCTL_NOTIF_ADDFD, uintptr(unsafe.Pointer(&a))); e != 0 {
		if e == unix.ENOENT {
			return answered // the caller is gone
		}
		return result{errno: e}
	}
	return answered
}

// openFIFO opens a fifo for writing on a thread of its own (it may block
// until a reader comes) and answers the caller.
func (m *Mediator) openFIFO(n Notif, dir int, name string, flags int, cloexec bool) {
	dup, err := unix.FcntlInt(uintptr(dir), unix.F_DUPFD_CLOEXEC, 0)
	r := result{errno: unix.EIO}
	if err == nil {
		defer unix.Close(dup)
		if err := PrepareThread(m.cfg.Creds); err == nil {
			fd, err := unix.Openat(dup, name, flags, 0)
			if err != nil {
				r = errResult(err)
			} else {
				r = m.inject(n.ID, fd, cloexec)
				unix.Close(fd)
			}
		}
	}
	if !r.answered {
		m.send(Response{ID: n.ID, Error: -int32(r.errno)})
	}
}

// send writes a response.
func (m *Mediator) send(resp Response) {
	unix.Syscall(unix.SYS_IOCTL, uintptr(m.cfg.Listener), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
}

// mknod creates a directory (S_IFDIR), fifo, socket or regular file.
func (c *call) mknod(dirfd int32, pathArg int, mode uint32, dev uint64) result {
	abs, err := c.path(dirfd, pathArg)
	if err != nil {
		return fail(err)
	}
	if mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
		return c.setID(abs)
	}
	isDir := mode&unix.S_IFMT == unix.S_IFDIR
	if isDir {
		abs = stripSlashes(abs)
	}
	e, err := lookup(c.m.root, abs, false, 0)
	if err != nil {
		return fail(err)
	}
	defer e.close()
	if !c.mediated(e.dir) {
		return cont
	}
	if unix.Fstatat(e.dir.fd, e.name, new(unix.Stat_t), unix.AT_SYMLINK_NOFOLLOW) == nil {
		return result{errno: unix.EEXIST}
	}
	op := policy.OpCreate
	if isDir {
		op = policy.OpMkdir
	}
	if d := c.check(op, e); d != nil {
		return c.deny(d)
	}
	perm := mode & 0o7777 &^ c.umask()
	if isDir {
		err = c.createIn(e, func() error { return unix.Mkdirat(e.dir.fd, e.name, perm) })
	} else {
		switch mode & unix.S_IFMT {
		case 0, unix.S_IFREG, unix.S_IFIFO, unix.S_IFSOCK:
		default:
			return result{errno: unix.EPERM} // devices: the sandbox has no CAP_MKNOD
		}
		err = c.createIn(e, func() error { return unix.Mknodat(e.dir.fd, e.name, mode&unix.S_IFMT|perm, int(dev)) })
	}
	if err != nil {
		return errResult(err)
	}
	return result{}
}

func (c *call) symlink(targetArg int, dirfd int32, pathArg int) result {
	target, err := c.str(targetArg)
	if err != nil {
		return fail(err)
	}
	abs, err := c.path(dirfd, pathArg)
	if err != nil {
		return fail(err)
	}
	e, err := lookup(c.m.root, abs, false, 0)
	if err != nil {
		return fail(err)
	}
	defer e.close()
	if !c.mediated(e.dir) {
		return cont
	}
	if d := c.check(policy.OpSymlink, e); d != nil {
		return c.deny(d)
	}
	if err := c.createIn(e, func() error { return unix.Symlinkat(target, e.dir.fd, e.name) }); err != nil {
		return errResult(err)
	}
	return result{}
}

func (c *call) link(olddir int32, oldArg int, newdir int32, newArg int, flags int) result {
	if flags&unix.AT_EMPTY_PATH != 0 {
		return cont // needs CAP_DAC_READ_SEARCH, which the sandbox lacks
	}
	oldAbs, err := c.path(olddir, oldArg)
	if err != nil {
		return fail(err)
	}
	newAbs, err := c.path(newdir, newArg)
	if err != nil {
		return fail(err)
	}
	oe, err := lookup(c.m.root, oldAbs, flags&unix.AT_SYMLINK_FOLLOW != 0, 0)
	if err != nil {
		return fail(err)
	}
	defer oe.close()
	ne, err := lookup(c.m.root, newAbs, false, 0)
	if err != nil {
		return fail(err)
	}
	defer ne.close()
	switch om, nm := c.mediated(oe.dir), c.mediated(ne.dir); {
	case !om && !nm:
		return cont
	case oe.dir.mnt != ne.dir.mnt:
		return result{errno: unix.EXDEV}
	}
	if d := c.check(policy.OpLinkSource, oe); d != nil {
		return c.deny(d)
	}
	op := policy.OpLink
	var ost unix.Stat_t
	if unix.Fstatat(oe.dir.fd, oe.name, &ost, unix.AT_SYMLINK_NOFOLLOW) == nil && ost.Mode&unix.S_IFMT == unix.S_IFLNK {
		op = policy.OpSymlink // a new name for a symlink is a new symlink
	}
	if d := c.check(op, ne); d != nil {
		return c.deny(d)
	}
	if err := unix.Linkat(oe.dir.fd, oe.name, ne.dir.fd, ne.name, 0); err != nil {
		return errResult(err)
	}
	return result{}
}

func (c *call) rename(olddir int32, oldArg int, newdir int32, newArg int, flags uint) result {
	oldAbs, err := c.path(olddir, oldArg)
	if err != nil {
		return fail(err)
	}
	newAbs, err := c.path(newdir, newArg)
	if err != nil {
		return fail(err)
	}
	oe, err := lookup(c.m.root, stripSlashes(oldAbs), false, 0)
	if err != nil {
		return fail(err)
	}
	defer oe.close()
	ne, err := lookup(c.m.root, stripSlashes(newAbs), false, 0)
	if err != nil {
		return fail(err)
	}
	defer ne.close()
	switch om, nm := c.mediated(oe.dir), c.mediated(ne.dir); {
	case !om && !nm:
		return cont
	case oe.dir.mnt != ne.dir.mnt:
		return result{errno: unix.EXDEV}
	}
	var ost, nst unix.Stat_t
	if err := unix.Fstatat(oe.dir.fd, oe.name, &ost, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return errResult(err)
	}
	if d := c.checkMove(ost.Mode, oe, ne); d != nil {
		return c.deny(d)
	}
	if flags&unix.RENAME_EXCHANGE != 0 {
		if err := unix.Fstatat(ne.dir.fd, ne.name, &nst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return errResult(err)
		}
		if d := c.checkMove(nst.Mode, ne, oe); d != nil {
			return c.deny(d)
		}
	}
	if err := unix.Renameat2(oe.dir.fd, oe.name, ne.dir.fd, ne.name, flags); err != nil {
		return errResult(err)
	}
	return result{}
}

// checkMove checks an entry of this mode leaving from and arriving at to:
// a directory or symlink may neither arrive at nor leave a config
// directory's name (the guard refuses both directions alike).
func (c *call) checkMove(mode uint32, from, to entry) *policy.Denial {
	op := renameOp(mode)
	if d := c.check(op, to); d != nil {
		return d
	}
	if op == policy.OpRenameDir || op == policy.OpSymlink {
		return c.check(policy.OpMoveAway, from)
	}
	return nil
}

// renameOp is how an entry of this mode arrives under its new name: a
// directory or a symlink (which may point at one) as such, else a file.
func renameOp(mode uint32) policy.GuardOp {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return policy.OpRenameDir
	case unix.S_IFLNK:
		return policy.OpSymlink
	}
	return policy.OpRenameFile
}

// truncate is performed here wherever it lands (Landlock only controls
// truncation from ABI 3 on).
func (c *call) truncate() result {
	abs, err := c.path(unix.AT_FDCWD, 0)
	if err != nil {
		return failClosed(err)
	}
	e, err := lookup(c.m.root, abs, true, 0)
	if err != nil {
		return failClosed(err)
	}
	defer e.close()
	if c.mediated(e.dir) {
		if d := c.check(policy.OpWrite, e); d != nil {
			return c.deny(d)
		}
	}
	fd, err := unix.Openat(e.dir.fd, e.name, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return errResult(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, int64(c.arg(1))); err != nil {
		return errResult(err)
	}
	return result{}
}

// procSelfFD recognises /proc/self/fd/N and /proc/thread-self/fd/N.
func procSelfFD(p string) (int32, bool) {
	for _, pre := range []string{"/proc/self/fd/", "/proc/thread-self/fd/"} {
		if rest, ok := strings.CutPrefix(p, pre); ok {
			if n, err := strconv.ParseInt(rest, 10, 32); err == nil && n >= 0 {
				return int32(n), true
			}
		}
	}
	return 0, false
}

// failClosed is fail for calls Landlock does not control: where the
// mediator cannot tell where a path lands, it refuses.
func failClosed(err error) result {
	if errors.Is(err, errResolve) {
		return result{errno: unix.EACCES}
	}
	return fail(err)
}

// chmod handles chmod/fchmodat/fchmodat2 that set execute bits (the filter
// lets the others through and refuses set-id bits): performed here
// wherever they land, since Landlock does not control modes.
func (c *call) chmod(dirfd int32, pathArg int, mode uint32, flags int) result {
	if mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
		p, _ := c.path(dirfd, pathArg)
		return c.denyRule(policy.RuleSetID, p, "chmod", unix.EPERM)
	}
	if flags&unix.AT_EMPTY_PATH != 0 {
		if p, err := c.str(pathArg); err == nil && p == "" {
			return c.fchmod(dirfd, mode)
		}
	}
	abs, err := c.path(dirfd, pathArg)
	if err != nil {
		return failClosed(err)
	}
	if fd, ok := procSelfFD(abs); ok {
		return c.fchmod(fd, mode) // chmod through /proc/self/fd/N: that file
	}
	e, err := lookup(c.m.root, abs, flags&unix.AT_SYMLINK_NOFOLLOW == 0, 0)
	if err != nil {
		return failClosed(err)
	}
	defer e.close()
	var st unix.Stat_t
	if err := unix.Fstatat(e.dir.fd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return errResult(err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return result{errno: unix.EOPNOTSUPP}
	}
	if c.mediated(e.dir) {
		if d := c.check(policy.OpChmodExec, e); d != nil {
			return c.deny(d)
		}
	}
	err = unix.Fchmodat(e.dir.fd, e.name, mode&0o7777, 0)
	if err == unix.EPERM {
		// As root inside would (its namespace's file, held by descriptor).
		if fd, oerr := unix.Openat(e.dir.fd, e.name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); oerr == nil {
			var fst unix.Stat_t
			// The file checked above, not one swapped in since.
			if unix.Fstat(fd, &fst) == nil && fst.Dev == st.Dev && fst.Ino == st.Ino {
				err = c.chmodAsRoot(err, &fst, func() error {
					return unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), mode&0o7777, 0)
				})
			}
			unix.Close(fd)
		}
	}
	if err != nil {
		return errResult(err)
	}
	return result{}
}

// fchmod handles fchmod with execute bits: the file the caller's
// descriptor holds, found through its magic link.
func (c *call) fchmod(fd int32, mode uint32) result {
	if mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
		p, _ := readlink("/proc/" + strconv.FormatUint(uint64(c.n.Pid), 10) + "/fd/" + strconv.Itoa(int(fd)))
		return c.denyRule(policy.RuleSetID, p, "chmod", unix.EPERM)
	}
	link := "/proc/" + strconv.FormatUint(uint64(c.n.Pid), 10) + "/fd/" + strconv.Itoa(int(fd))
	f, err := unix.Open(link, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return result{errno: unix.EBADF}
	}
	defer unix.Close(f)
	if !c.valid() {
		return result{errno: unix.ENOENT}
	}
	var stx unix.Statx_t
	if err := unix.Statx(f, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID|unix.STATX_TYPE, &stx); err != nil {
		return errResult(err)
	}
	if c.m.mounts[stx.Mnt_id] {
		p, err := readlink("/proc/self/fd/" + strconv.Itoa(f))
		if err != nil || !strings.HasPrefix(p, "/") || strings.HasSuffix(p, " (deleted)") {
			return result{errno: unix.EACCES}
		}
		if p != "/" {
			e, err := lookup(c.m.root, p, false, 0)
			if err != nil {
				return failClosed(err)
			}
			d := c.check(policy.OpChmodExec, e)
			e.close()
			if d != nil {
				return c.deny(d)
			}
		}
	}
	chmod := func() error { return unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(f), mode&0o7777, 0) }
	err = chmod()
	if err == unix.EPERM {
		var st unix.Stat_t
		if unix.Fstat(f, &st) == nil {
			err = c.chmodAsRoot(err, &st, chmod)
		}
	}
	if err != nil {
		return errResult(err)
	}
	return result{}
}

// readString reads a NUL-terminated string of at most PATH_MAX bytes at
// addr in thread tid's memory, a page at a time (a string near the end of
// a mapping must not fail on the next, unmapped page).
func readString(tid uint32, addr uintptr) (string, error) {
	if addr == 0 {
		return "", unix.EFAULT
	}
	const page = 4096
	var out []byte
	for len(out) < unix.PathMax {
		n := page - int(addr%page)
		buf := make([]byte, n)
		if err := readMem(tid, addr, buf); err != nil {
			return "", unix.EFAULT
		}
		if i := indexByte(buf, 0); i >= 0 {
			return string(append(out, buf[:i]...)), nil
		}
		out = append(out, buf...)
		addr += uintptr(n)
	}
	return "", unix.ENAMETOOLONG
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// readMem fills buf from thread tid's memory at addr.
func readMem(tid uint32, addr uintptr, buf []byte) error {
	local := []unix.Iovec{{Base: &buf[0], Len: uint64(len(buf))}}
	remote := []unix.RemoteIovec{{Base: addr, Len: len(buf)}}
	var n int
	err := asTracer(func() (err error) {
		n, err = unix.ProcessVMReadv(int(tid), local, remote, 0)
		return err
	})
	if err != nil {
		return err
	}
	if n != len(buf) {
		return unix.EFAULT
	}
	return nil
}
