package main

// Namespace and mount attacks. Each runs its operation in a child with a new
// mount namespace (made private first, so nothing propagates back): without
// a user namespace when the caller may (root on the host), else inside a new
// user namespace, else (mount-tmpfs, mount-api) in the current namespace.

import (
	"errors"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/internal/mountinfo"
)

func init() {
	register("userns-create", attackUsernsCreate)
	register("ns", attackNS)
	register("ns-op", nsOp)
}

func attackUsernsCreate(params) {
	self, _ := os.Executable()
	c := exec.Command(self, "memfd-payload")
	c.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
	if err := c.Start(); err != nil {
		blocked("clone(CLONE_NEWUSER): %v", err)
	}
	_ = c.Wait()
	escaped("created a new user namespace (clone CLONE_NEWUSER)")
}

// attackNS runs nsOp in the most privileged fresh namespace it can get.
func attackNS(p params) {
	self, _ := os.Executable()
	op := p.get("op")
	uid, gid := os.Getuid(), os.Getgid()
	tries := []struct {
		name string
		attr *syscall.SysProcAttr
	}{
		{"new mount namespace", &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}},
		{"new user+mount namespace", &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}},
		}},
	}
	if p["userns"] != "1" {
		tries = append(tries, struct {
			name string
			attr *syscall.SysProcAttr
		}{"current namespace", &syscall.SysProcAttr{}})
	}
	var errs []string
	for _, t := range tries {
		c := exec.Command(self, "ns-op", "op="+op, "private="+boolStr(t.attr.Cloneflags != 0))
		c.SysProcAttr = t.attr
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
		err := c.Start()
		if err != nil {
			errs = append(errs, t.name+": "+err.Error())
			continue
		}
		note("running %s in a %s", op, t.name)
		err = c.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			os.Exit(ee.ExitCode())
		}
		if err != nil {
			fail("wait: %v", err)
		}
		os.Exit(exitEscaped)
	}
	blocked("%s", strings.Join(errs, "; "))
}

func boolStr(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

type mountEntry struct {
	point string
	ro    bool
}

func mounts() []mountEntry {
	mis, _ := mountinfo.Self()
	var out []mountEntry
	for _, m := range mis {
		out = append(out, mountEntry{point: m.Point, ro: m.ReadOnly()})
	}
	// Deepest first, so children go before their parents.
	sort.Slice(out, func(i, j int) bool { return len(out[i].point) > len(out[j].point) })
	return out
}

func nsOp(p params) {
	if p["private"] == "1" {
		// Nothing else is tried when this fails: on the host, a mount
		// change that could propagate back must never happen.
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			blocked("mount(MS_REC|MS_PRIVATE) in the new namespace refused: %v", err)
		}
	}
	op := p.get("op")
	run, ok := nsOps[op]
	if !ok {
		fail("op %q", op)
	}
	run()
}

// nsOps are nsOp's attacks by name.
var nsOps = map[string]func(){
	"umount": nsUmount, "remount": nsRemount, "pivot": nsPivot, "tmpfs": nsTmpfs, "mount-api": nsMountAPI,
}

// nsUmount tries to unmount every mount but /.
func nsUmount() {
	var errs []string
	for _, m := range mounts() {
		if m.point == "/" {
			continue
		}
		err := unix.Unmount(m.point, unix.MNT_DETACH)
		if err == nil {
			escaped("unmounted %s", m.point)
		}
		if len(errs) < 4 {
			errs = append(errs, m.point+": "+err.Error())
		}
	}
	blocked("umount refused: %s", strings.Join(errs, "; "))
}

// nsRemount tries to remount a read-only mount read-write.
func nsRemount() {
	var errs []string
	found := false
	for _, m := range mounts() {
		if !m.ro {
			continue
		}
		found = true
		err := unix.Mount("", m.point, "", unix.MS_REMOUNT|unix.MS_BIND, "")
		if err == nil {
			escaped("remounted read-only %s read-write", m.point)
		}
		if len(errs) < 4 {
			errs = append(errs, m.point+": "+err.Error())
		}
	}
	if !found {
		// No read-only mount to attack (the unconfined host): prove the
		// mechanism on one of our own.
		dir := tempDir()
		if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
			blocked("bind mount: %v", err)
		}
		if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
			blocked("remount ro: %v", err)
		}
		if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND, ""); err != nil {
			blocked("remount rw: %v", err)
		}
		escaped("no read-only mount here; remounted our own read-only bind mount read-write")
	}
	blocked("remount refused: %s", strings.Join(errs, "; "))
}

// nsPivot tries pivot_root into a fresh tmpfs.
func nsPivot() {
	dir := tempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		blocked("mount tmpfs: %v", err)
	}
	if err := os.Mkdir(dir+"/old", 0o700); err != nil {
		fail("mkdir: %v", err)
	}
	if err := unix.PivotRoot(dir, dir+"/old"); err != nil {
		blocked("pivot_root: %v", err)
	}
	escaped("pivot_root into a fresh tmpfs")
}

// nsTmpfs tries to mount a tmpfs.
func nsTmpfs() {
	dir := tempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		blocked("mount tmpfs on %s: %v", dir, err)
	}
	escaped("mounted a tmpfs on %s", dir)
}

// nsMountAPI tries the new mount API (fsopen/fsmount, open_tree).
func nsMountAPI() {
	fd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err == nil {
		if err = unix.FsconfigCreate(fd); err == nil {
			mfd, err := unix.Fsmount(fd, unix.FSMOUNT_CLOEXEC, 0)
			if err == nil {
				escaped("fsopen+fsconfig+fsmount made a detached tmpfs mount (fd %d)", mfd)
			}
			note("fsmount: %v", err)
		} else {
			note("fsconfig: %v", err)
		}
	} else {
		note("fsopen: %v", err)
	}
	tfd, err2 := unix.OpenTree(unix.AT_FDCWD, "/", unix.OPEN_TREE_CLONE|unix.AT_RECURSIVE|unix.OPEN_TREE_CLOEXEC)
	if err2 == nil {
		escaped("open_tree(OPEN_TREE_CLONE) cloned / (fd %d)", tfd)
	}
	blocked("new mount API refused: fsopen/fsmount: %v; open_tree: %v", err, err2)
}

func tempDir() string {
	dir, err := os.MkdirTemp("", "airlock-mnt-")
	if err != nil {
		fail("mkdtemp: %v", err)
	}
	return dir
}
