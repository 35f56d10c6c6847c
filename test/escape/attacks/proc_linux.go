package main

// Process attacks: reaching processes outside the sandbox (a victim the
// runner starts on the host) and outliving the sandbox.

import (
	"bytes"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// victimBuf lives at the same address in every run of this (non-PIE, static)
// binary, so an attacker knows where to write in the victim.
var victimBuf = [32]byte{'u', 'n', 't', 'o', 'u', 'c', 'h', 'e', 'd'}

func init() {
	register("victim", runVictim)
	register("ptrace", attackPtrace)
	register("proc-mem", attackProcMem)
	register("proc-environ", attackProcEnviron)
	register("vm-writev", attackVMWritev)
	register("pidfd-getfd", attackPidfdGetfd)
	register("signal", attackSignal)
	register("kill", attackKill)
	register("ps", attackPS)
	register("outlive", attackOutlive)
	register("outlive-mid", outliveMid)
	register("sleeper", runSleeper)
	register("fd-channel", attackFDChannel)
}

// runVictim is the host process the attacks aim at. It records every
// successful interference as a marker file in dir.
func runVictim(p params) {
	dir, secret := p.get("dir"), p.get("secret")
	f, err := os.Open(secret)
	if err != nil {
		fail("victim: %v", err)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		fail("victim: %v", err)
	}
	info := "secret_fd=" + strconv.Itoa(int(f.Fd())) + "\nsock_fd=" + strconv.Itoa(pair[0]) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "info"), []byte(info), 0o644); err != nil {
		fail("victim: %v", err)
	}
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGUSR1)
	orig := victimBuf
	for {
		select {
		case <-sig:
			_ = os.WriteFile(filepath.Join(dir, "sigusr1"), []byte("received SIGUSR1"), 0o644)
		case <-time.After(20 * time.Millisecond):
		}
		if cur := victimBuf; cur != orig {
			_ = os.WriteFile(filepath.Join(dir, "mem-written"), cur[:], 0o644)
			orig = cur
		}
		runtime.KeepAlive(f)
	}
}

// identify checks that pid is the runner's victim (its command line holds
// token) rather than some process that happens to have that number here.
func identify(pid int, token string) {
	if token == "" {
		return
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		blocked("host process %d not visible: %v", pid, err)
	}
	if !bytes.Contains(b, []byte(token)) {
		blocked("pid %d here is not the host victim (%s)", pid, short(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
	}
}

// pids parses "1,ppid,1234".
func pidList(p params) []int {
	var out []int
	for _, s := range strings.Split(p.get("pids"), ",") {
		if s == "ppid" {
			out = append(out, os.Getppid())
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			fail("pid %q: %v", s, err)
		}
		out = append(out, n)
	}
	return out
}

func attackPtrace(p params) {
	runtime.LockOSThread()
	var errs []string
	for _, pid := range pidList(p) {
		identify(pid, p["token"])
		if err := unix.PtraceAttach(pid); err != nil {
			errs = append(errs, "ptrace attach "+strconv.Itoa(pid)+": "+err.Error())
			continue
		}
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, unix.WALL, nil)
		_ = unix.PtraceDetach(pid)
		escaped("attached to pid %d with ptrace", pid)
	}
	blocked("%s", strings.Join(errs, "; "))
}

func attackProcMem(p params) {
	var errs []string
	for _, pid := range pidList(p) {
		identify(pid, p["token"])
		f, err := os.OpenFile("/proc/"+strconv.Itoa(pid)+"/mem", os.O_RDWR, 0)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		f.Close()
		escaped("opened /proc/%d/mem for writing", pid)
	}
	blocked("%s", strings.Join(errs, "; "))
}

func attackProcEnviron(p params) {
	var errs []string
	for _, pid := range pidList(p) {
		identify(pid, p["token"])
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if len(b) > 0 {
			escaped("read /proc/%d/environ: %d bytes: %s", pid, len(b), short(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
		}
		errs = append(errs, "/proc/"+strconv.Itoa(pid)+"/environ empty")
	}
	blocked("%s", strings.Join(errs, "; "))
}

func attackVMWritev(p params) {
	pid := intParam(p, "pid")
	identify(pid, p.get("token"))
	payload := []byte("PWNED-by-process_vm_writev")
	local := []unix.Iovec{{Base: &payload[0], Len: uint64(len(payload))}}
	remote := []unix.RemoteIovec{{Base: uintptr(unsafe.Pointer(&victimBuf[0])), Len: len(payload)}}
	n, err := unix.ProcessVMWritev(pid, local, remote, 0)
	if err != nil {
		blocked("process_vm_writev %d: %v", pid, err)
	}
	escaped("process_vm_writev wrote %d bytes into pid %d", n, pid)
}

func attackPidfdGetfd(p params) {
	pid, fd := intParam(p, "pid"), intParam(p, "fd")
	identify(pid, p.get("token"))
	pfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		blocked("pidfd_open %d: %v", pid, err)
	}
	nfd, err := unix.PidfdGetfd(pfd, fd, 0)
	if err != nil {
		blocked("pidfd_getfd %d/%d: %v", pid, fd, err)
	}
	buf := make([]byte, 4096)
	n, err := unix.Pread(nfd, buf, 0)
	if err != nil {
		escaped("stole fd %d of pid %d (read: %v)", fd, pid, err)
	}
	escaped("stole fd %d of pid %d and read %s", fd, pid, short(buf[:n]))
}

func attackSignal(p params) {
	pid := intParam(p, "pid")
	identify(pid, p.get("token"))
	if err := unix.Kill(pid, unix.SIGUSR1); err != nil {
		blocked("kill %d SIGUSR1: %v", pid, err)
	}
	escaped("sent SIGUSR1 to host pid %d", pid)
}

// attackKill SIGKILLs each target and checks whether it died.
func attackKill(p params) {
	var res []string
	for _, pid := range pidList(p) {
		if pid == os.Getpid() || pid <= 0 {
			continue
		}
		err := unix.Kill(pid, unix.SIGKILL)
		if err != nil {
			res = append(res, "kill "+strconv.Itoa(pid)+": "+err.Error())
			continue
		}
		dead := false
		for i := 0; i < 50 && !dead; i++ {
			time.Sleep(20 * time.Millisecond)
			st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			dead = err != nil || procState(st) == "Z" || procState(st) == "X"
		}
		if dead {
			escaped("SIGKILL to pid %d: it died", pid)
		}
		res = append(res, "pid "+strconv.Itoa(pid)+" survived SIGKILL")
	}
	blocked("%s", strings.Join(res, "; "))
}

func procState(stat []byte) string {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return ""
	}
	return string(stat[i+2])
}

func attackPS(p params) {
	token := p.get("token")
	ents, err := os.ReadDir("/proc")
	if err != nil {
		blocked("read /proc: %v", err)
	}
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		n++
		b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if bytes.Contains(b, []byte(token)) {
			escaped("host process %d visible: %s", pid, short(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
		}
	}
	blocked("no host process visible among %d processes", n)
}

// attackOutlive leaves a sleeper behind; whether it outlived the sandbox is
// decided by the runner after destroy.
func attackOutlive(p params) {
	self, _ := os.Executable()
	token := p.get("token")
	switch mode := p.get("mode"); mode {
	case "double-fork":
		mid := exec.Command(self, "outlive-mid", "token="+token, "setsid=0")
		if out, err := mid.CombinedOutput(); err != nil {
			blocked("double fork: %v %s", err, out)
		}
	case "setsid":
		c := exec.Command(self, "sleeper", "token="+token)
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := c.Start(); err != nil {
			blocked("setsid child: %v", err)
		}
	case "daemon":
		mid := exec.Command(self, "outlive-mid", "token="+token, "setsid=1")
		mid.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if out, err := mid.CombinedOutput(); err != nil {
			blocked("daemonize: %v %s", err, out)
		}
	default:
		fail("mode %q", mode)
	}
	escaped("left a detached sleeper (%s); the runner checks it after destroy", p["mode"])
}

func outliveMid(p params) {
	self, _ := os.Executable()
	c := exec.Command(self, "sleeper", "token="+p.get("token"))
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: p["setsid"] == "1"}
	c.Dir = "/"
	if err := c.Start(); err != nil {
		fail("start sleeper: %v", err)
	}
	os.Exit(0)
}

func runSleeper(p params) {
	signal.Ignore(syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT, syscall.SIGPIPE)
	time.Sleep(5 * time.Minute)
	os.Exit(0)
}

// attackFDChannel looks for the agent's control channel: a socket among its
// own inherited descriptors, or one taken from the targets with pidfd_getfd
// or /proc/<pid>/fd.
func attackFDChannel(p params) {
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		fd, _ := strconv.Atoi(e.Name())
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		if fd > 2 && strings.HasPrefix(l, "socket:") {
			escaped("inherited a socket descriptor %d (%s)", fd, l)
		}
	}
	var errs []string
	for _, pid := range pidList(p) {
		ps := strconv.Itoa(pid)
		fds, err := os.ReadDir("/proc/" + ps + "/fd")
		if err != nil {
			errs = append(errs, err.Error())
		}
		for _, e := range fds {
			l, _ := os.Readlink("/proc/" + ps + "/fd/" + e.Name())
			if !strings.HasPrefix(l, "socket:") {
				continue
			}
			if f, err := os.OpenFile("/proc/"+ps+"/fd/"+e.Name(), os.O_RDWR, 0); err == nil {
				f.Close()
				escaped("opened pid %d's socket fd %s (%s) through /proc", pid, e.Name(), l)
			}
		}
		pfd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			errs = append(errs, "pidfd_open "+ps+": "+err.Error())
			continue
		}
		for fd := 0; fd < 64; fd++ {
			nfd, err := unix.PidfdGetfd(pfd, fd, 0)
			if err == nil {
				l, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(nfd))
				if strings.HasPrefix(l, "socket:") {
					escaped("took socket fd %d of pid %d with pidfd_getfd (%s)", fd, pid, l)
				}
				unix.Close(nfd)
			} else if err != unix.EBADF {
				errs = append(errs, "pidfd_getfd "+ps+": "+err.Error())
				break
			}
		}
	}
	blocked("no control channel reachable: %s", strings.Join(errs, "; "))
}
