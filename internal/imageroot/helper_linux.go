package imageroot

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/sandbox"
)

// HelperCommand is the hidden airlock subcommand that runs HelperMain.
const HelperCommand = "__image-overlay"

// maxHelperLayers bounds the layers MappedOverlay passes in one message
// (the kernel passes at most 253 descriptors at once).
const maxHelperLayers = 128

// helperTimeout bounds the whole exchange with the helper.
const helperTimeout = 30 * time.Second

// MappedOverlay makes the root of an image sandbox whose runtime runs as
// a leased host id range (gVisor's runsc in a user namespace mapping
// 0..count-1 onto uid..uid+count-1, gid likewise), as the native backend's
// init makes its own: the layers and the writable layer idmapped through
// a user namespace with that mapping (ids stored k appear as uid+k), and
// the overlay made inside that namespace, by a helper (bin, the airlock
// binary, run as HelperCommand), so that its copy-ups carry the range's
// credentials. A file the image stores as root belongs to the range's
// root, and what the sandbox writes is stored with its inside ids, as in
// an image layer. It returns the overlay, detached (Attach it); the
// helper is gone when it returns.
func MappedOverlay(bin string, layers []string, w *Writable, uid, gid, count int) (_ *os.File, err error) {
	if len(layers) == 0 || len(layers) > maxHelperLayers {
		return nil, fmt.Errorf("image root: %d layers, 1 to %d with a host id range: %w", len(layers), maxHelperLayers, sandbox.ErrLimit)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("image root: socketpair: %v: %w", err, sandbox.ErrUnavailable)
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "overlay-helper"), os.NewFile(uintptr(pair[1]), "overlay-helper")
	defer ours.Close()
	cmd := exec.Command(bin, HelperCommand)
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: count}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: count}},
		// Root of the namespace, i.e. the range's first ids on the host
		// (host root is no id of the namespace).
		Credential: &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
		Pdeathsig:  syscall.SIGKILL,
	}
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	err = cmd.Start()
	theirs.Close()
	if err != nil {
		return nil, fmt.Errorf("image root: start the overlay helper %s: %v: %w", bin, err, sandbox.ErrUnavailable)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if err != nil && stderr.String() != "" {
			err = fmt.Errorf("%w (helper: %s)", err, stderr.String())
		}
	}()
	ns, err := os.Open("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/user")
	if err != nil {
		return nil, fmt.Errorf("image root: the helper's user namespace: %v: %w", err, sandbox.ErrUnavailable)
	}
	mapped, err := Mapped(append(append([]string{}, layers...), w.Dir), ns)
	ns.Close()
	if err != nil {
		return nil, err
	}
	fds := make([]int, len(mapped))
	for i, f := range mapped {
		defer f.Close()
		fds[i] = int(f.Fd())
	}
	fc, err := net.FileConn(ours)
	if err != nil {
		return nil, fmt.Errorf("image root: %v: %w", err, sandbox.ErrUnavailable)
	}
	conn := fc.(*net.UnixConn)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(helperTimeout))
	if _, _, err := conn.WriteMsgUnix([]byte(strconv.Itoa(len(layers))), unix.UnixRights(fds...), nil); err != nil {
		return nil, fmt.Errorf("image root: to the overlay helper: %v: %w", err, sandbox.ErrUnavailable)
	}
	buf, oob := make([]byte, 1024), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, fmt.Errorf("image root: from the overlay helper: %v: %w", err, sandbox.ErrUnavailable)
	}
	got, err := rights(oob[:oobn])
	if err != nil || len(got) != 1 {
		for _, fd := range got {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("image root: overlay helper: %s: %w", buf[:n], sandbox.ErrUnavailable)
	}
	return os.NewFile(uintptr(got[0]), "overlay"), nil
}

func rights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for i := range msgs {
		f, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			return fds, err
		}
		fds = append(fds, f...)
	}
	return fds, nil
}

// HelperMain is HelperCommand: in the user and mount namespaces
// MappedOverlay made, it receives the idmapped layers and writable layer
// on fd 3, makes the overlay of them (Detached) and sends it back. Its
// mounts stay in its own namespace (made private first), which ends with
// it.
func HelperMain() int {
	f := os.NewFile(3, "overlay-helper")
	fc, err := net.FileConn(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "overlay helper:", err)
		return 1
	}
	conn := fc.(*net.UnixConn)
	ov, err := helperOverlay(conn)
	if err != nil {
		_, _, _ = conn.WriteMsgUnix([]byte(err.Error()), nil, nil)
		return 1
	}
	if _, _, err := conn.WriteMsgUnix([]byte("ok"), unix.UnixRights(int(ov.Fd())), nil); err != nil {
		fmt.Fprintln(os.Stderr, "overlay helper:", err)
		return 1
	}
	// Until the host has it (it closes its end, or kills us).
	_, _ = conn.Read(make([]byte, 1))
	return 0
}

func helperOverlay(conn *net.UnixConn) (*os.File, error) {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return nil, fmt.Errorf("make mounts private: %w", err)
	}
	buf, oob := make([]byte, 64), make([]byte, unix.CmsgSpace(4*(maxHelperLayers+1)))
	n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, fmt.Errorf("receive layers: %w", err)
	}
	layers, err := strconv.Atoi(string(buf[:n]))
	fds, ferr := rights(oob[:oobn])
	if err = errors.Join(err, ferr); err != nil {
		return nil, fmt.Errorf("receive layers: %w", err)
	}
	if len(fds) != layers+1 {
		return nil, fmt.Errorf("%d descriptors for %d layers and the writable layer", len(fds), layers)
	}
	// overlayfs takes private clones of its layers, which it may do only
	// of mounts in our own namespace: attach them on a small tmpfs first.
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0700,size=64k"); err != nil {
		return nil, fmt.Errorf("staging tmpfs: %w", err)
	}
	paths := make([]string, len(fds))
	for i, fd := range fds {
		paths[i] = "/tmp/" + strconv.Itoa(i)
		if err := os.Mkdir(paths[i], 0o700); err != nil {
			return nil, err
		}
		if err := Attach(fd, paths[i]); err != nil {
			return nil, fmt.Errorf("attach layer %d: %w", i, err)
		}
		unix.Close(fd)
	}
	w := &Writable{Dir: paths[layers], Upper: paths[layers] + "/upper", Work: paths[layers] + "/work"}
	return Detached(paths[:layers], w)
}

// limitedBuffer keeps the first 4 KiB written to it.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 4096 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }
