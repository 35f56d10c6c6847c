// Command attack is the native backend tests' in-sandbox attacker: each
// subcommand tries one thing a confined process must not be able to do and
// prints "OK" when it worked or "DENIED: <errno>" when it did not. It is
// built by the tests and run both unconfined and inside a sandbox.
package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Println("usage: attack CMD [ARGS]")
		os.Exit(2)
	}
	err := run(os.Args[1], os.Args[2:])
	if err != nil {
		fmt.Printf("DENIED: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("OK")
}

func run(cmd string, args []string) error {
	switch cmd {
	case "read":
		_, err := os.ReadFile(args[0])
		return err
	case "write":
		return os.WriteFile(args[0], []byte("attack\n"), 0o755)
	case "append":
		f, err := os.OpenFile(args[0], os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteString("attack\n")
		return err
	case "rename":
		return os.Rename(args[0], args[1])
	case "replace-dir":
		// Move a directory away, re-create it and write a file in it.
		if err := os.Rename(args[0], args[0]+".moved"); err != nil {
			return err
		}
		if err := os.Mkdir(args[0], 0o755); err != nil {
			return err
		}
		return os.WriteFile(args[0]+"/"+args[1], []byte("attack\n"), 0o644)
	case "remove":
		return os.RemoveAll(args[0])
	case "connect":
		c, err := net.DialTimeout("tcp", args[0], 2*time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	case "interfaces":
		ifs, err := net.Interfaces()
		if err != nil {
			return err
		}
		for _, i := range ifs {
			fmt.Println("if:", i.Name)
		}
		return nil
	case "ptrace":
		pid, _ := strconv.Atoi(args[0])
		if _, _, e := syscall.Syscall6(syscall.SYS_PTRACE, unix.PTRACE_ATTACH, uintptr(pid), 0, 0, 0, 0); e != 0 {
			return e
		}
		return nil
	case "procmem":
		f, err := os.Open("/proc/" + args[0] + "/mem")
		if err != nil {
			return err
		}
		return f.Close()
	case "unshare-user":
		// A new user namespace, then a mount in it (the classic way back
		// to capabilities).
		c := exec.Command("/proc/self/exe", "mount-tmpfs", "/tmp")
		c.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}}
		out, err := c.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v %s", err, out)
		}
		return nil
	case "unshare":
		return unix.Unshare(unix.CLONE_NEWUSER)
	case "mount-tmpfs":
		return unix.Mount("tmpfs", args[0], "tmpfs", 0, "")
	case "remount-rw":
		return unix.Mount("", args[0], "", unix.MS_REMOUNT|unix.MS_BIND, "")
	case "umount":
		return unix.Unmount(args[0], unix.MNT_DETACH)
	case "tiocsti":
		f, err := os.OpenFile(args[0], os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		c := byte('x')
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), unix.TIOCSTI, uintptr(unsafe.Pointer(&c))); e != 0 {
			return e
		}
		return nil
	case "noop":
		return nil
	case "memfd-exec":
		// Run this binary from an anonymous memory file.
		self, err := os.ReadFile("/proc/self/exe")
		if err != nil {
			return err
		}
		fd, err := unix.MemfdCreate("payload", 0)
		if err != nil {
			return err
		}
		if _, err := unix.Write(fd, self); err != nil {
			return err
		}
		empty, _ := unix.BytePtrFromString("")
		argv, _ := syscall.SlicePtrFromStrings([]string{"attack", "noop"})
		envv, _ := syscall.SlicePtrFromStrings(os.Environ())
		_, _, e := syscall.Syscall6(unix.SYS_EXECVEAT, uintptr(fd), uintptr(unsafe.Pointer(empty)),
			uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])), unix.AT_EMPTY_PATH, 0)
		return e
	case "bpf":
		if _, _, e := syscall.Syscall(unix.SYS_BPF, 0, 0, 0); e != 0 {
			return e
		}
		return nil
	case "keyctl":
		if _, _, e := syscall.Syscall(unix.SYS_KEYCTL, 0, 0, 0); e != 0 {
			return e
		}
		return nil
	case "alloc":
		// Touch N MiB, one page at a time.
		n, _ := strconv.Atoi(args[0])
		var keep [][]byte
		for i := 0; i < n; i++ {
			b := make([]byte, 1<<20)
			for j := 0; j < len(b); j += 4096 {
				b[j] = 1
			}
			keep = append(keep, b)
		}
		fmt.Println("allocated", len(keep))
		return nil
	case "fork":
		n, _ := strconv.Atoi(args[0])
		var ps []*os.Process
		defer func() {
			for _, p := range ps {
				p.Kill()
				p.Wait()
			}
		}()
		for i := 0; i < n; i++ {
			p, err := os.StartProcess("/bin/sleep", []string{"sleep", "30"}, &os.ProcAttr{})
			if err != nil {
				return fmt.Errorf("after %d: %w", i, err)
			}
			ps = append(ps, p)
		}
		return nil
	case "daemon":
		// Leave a detached, session-leading grandchild behind.
		c := exec.Command("/bin/sleep", args[0])
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := c.Start(); err != nil {
			return err
		}
		fmt.Println("daemon", c.Process.Pid)
		return nil
	}
	return fmt.Errorf("unknown command %q", cmd)
}
