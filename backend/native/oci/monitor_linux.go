package oci

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/backend/internal/fsguard"
	"github.com/airlock-dev/airlock/backend/native"
	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/policy"
)

// MonitorCommand is the hidden subcommand that serves a container's
// seccomp listeners: its write mediator (protected config and set-id bits
// on host-backed writable mounts) and its denied calls. It runs outside
// the container, as a sibling of the container's process, from create
// until the container's last process is gone.
const MonitorCommand = "__oci-monitor"

type monitorPlan struct {
	Pid      int                `json:"pid"`
	Mediated []string           `json:"mediated"`
	Guard    policy.ConfigGuard `json:"guard"`
	Creds    fsguard.Creds      `json:"creds"`
	Socket   string             `json:"socket"`
	Audit    string             `json:"audit"`
}

func credsOf(pp *procPlan) fsguard.Creds {
	c := fsguard.Creds{UID: int(pp.UID), GID: int(pp.GID), Groups: []int{}}
	for _, g := range pp.Groups {
		c.Groups = append(c.Groups, int(g))
	}
	return c
}

// startMonitor starts the monitor with the init's listener and waits until
// it serves it.
func (r *Runtime) startMonitor(id string, pid, listener int, plan *initPlan, pol *policy.Policy) (int, uint64, error) {
	lf := os.NewFile(uintptr(listener), "seccomp-listener")
	defer lf.Close()
	home := ""
	for _, kv := range plan.Proc.Env {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	guard := pol.ConfigGuard(home)
	dir := r.store().dir(id)
	mp := monitorPlan{Pid: pid, Mediated: plan.Confine.MediatedPaths, Guard: *guard, Creds: credsOf(&plan.Proc),
		Socket: filepath.Join(dir, "monitor.sock"), Audit: filepath.Join(dir, "audit.jsonl")}
	b, _ := json.Marshal(mp)
	rd, wr, err := os.Pipe()
	if err != nil {
		return 0, 0, err
	}
	defer rd.Close()
	cmd := exec.Command(r.Binary, MonitorCommand, string(b))
	cmd.Args[0] = "airlock-runc-monitor"
	cmd.Env = []string{"GOMAXPROCS=2"}
	cmd.ExtraFiles = []*os.File{lf, wr}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		wr.Close()
		return 0, 0, fmt.Errorf("start monitor: %v: %w", err, errdefs.ErrUnavailable)
	}
	wr.Close()
	_ = rd.SetReadDeadline(time.Now().Add(setupTimeout))
	msg, _ := io.ReadAll(io.LimitReader(rd, 4096))
	if string(msg) != "ok" {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		return 0, 0, fmt.Errorf("monitor: %s: %w", strings.TrimSpace(string(msg)), errdefs.ErrUnavailable)
	}
	start, _, err := procStart(cmd.Process.Pid)
	if err != nil {
		return 0, 0, err
	}
	// Not waited for: it outlives create, reaped by the caller's subreaper.
	_ = cmd.Process.Release()
	return cmd.Process.Pid, start, nil
}

// MonitorMain is `airlock __oci-monitor PLAN`.
func MonitorMain(args []string) int {
	ready := os.NewFile(4, "ready")
	fail := func(err error) int {
		fmt.Fprintf(ready, "%v", err)
		ready.Close()
		return 1
	}
	if len(args) != 1 {
		return fail(fmt.Errorf("usage: %s PLAN", MonitorCommand))
	}
	var mp monitorPlan
	if err := json.Unmarshal([]byte(args[0]), &mp); err != nil {
		return fail(err)
	}
	audit, err := os.OpenFile(mp.Audit, os.O_CREATE|os.O_WRONLY|os.O_APPEND|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fail(err)
	}
	var mu sync.Mutex
	report := func(ev map[string]any) {
		ev["time"] = time.Now().UTC().Format(time.RFC3339Nano)
		b, _ := json.Marshal(ev)
		mu.Lock()
		_, _ = audit.Write(append(b, '\n'))
		mu.Unlock()
	}
	initDone, err := serveListener(3, mp, mp.Creds, report)
	if err != nil {
		return fail(err)
	}
	_ = os.Remove(mp.Socket)
	ln, err := withShortPath(mp.Socket, func(p string) (*net.UnixListener, error) {
		return net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
	})
	if err != nil {
		return fail(err)
	}
	_ = os.Chmod(mp.Socket, 0o600)
	go acceptExecs(ln, mp, report)
	fmt.Fprint(ready, "ok")
	ready.Close()
	<-initDone
	ln.Close()
	return 0
}

// serveListener starts a supervisor with a write mediator for one
// listener; the channel closes when the processes it serves are gone.
func serveListener(fd int, mp monitorPlan, creds fsguard.Creds, report func(map[string]any)) (<-chan struct{}, error) {
	sup, err := native.StartSupervisor(&creds, func(name string, pid uint32) {
		report(map[string]any{"type": "violation", "syscall": name, "pid": pid})
	})
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	guard := mp.Guard
	med, err := fsguard.New(fsguard.Config{Pid: mp.Pid, Mounts: mp.Mediated, Guard: &guard, Creds: creds, Listener: fd,
		Report: func(d policy.Denial, tid uint32) {
			report(map[string]any{"type": "denied", "rule": d.Rule, "path": d.Path, "op": d.Op, "pid": tid})
		}})
	if err != nil {
		sup.Stop()
		unix.Close(fd)
		return nil, fmt.Errorf("write mediator: %w", err)
	}
	if err := sup.Serve(fd, med); err != nil {
		sup.Stop()
		return nil, err
	}
	return sup.Done(), nil
}

// acceptExecs serves the listeners of exec'd processes, sent by `exec`
// over the monitor's socket with their credentials.
func acceptExecs(ln *net.UnixListener, mp monitorPlan, report func(map[string]any)) {
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			// Only root (the runtime) hands listeners over: a listener
			// served here is acted on with the credentials sent with it.
			if !peerIsRoot(c) {
				return
			}
			buf := make([]byte, 4096)
			oob := make([]byte, unix.CmsgSpace(4))
			n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
			if err != nil || oobn == 0 {
				return
			}
			msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
			if err != nil || len(msgs) == 0 {
				return
			}
			fds, err := unix.ParseUnixRights(&msgs[0])
			if err != nil || len(fds) == 0 {
				return
			}
			var creds fsguard.Creds
			if err := json.Unmarshal(buf[:n], &creds); err != nil {
				unix.Close(fds[0])
				return
			}
			if _, err := serveListener(fds[0], mp, creds, report); err != nil {
				_, _ = c.Write([]byte(err.Error()))
				return
			}
			_, _ = c.Write([]byte("ok"))
		}()
	}
}

// sendToMonitor hands an exec'd process's listener to the container's
// monitor and waits until it serves it.
func sendToMonitor(dir string, listener int, pp *procPlan) error {
	defer unix.Close(listener)
	c, err := withShortPath(filepath.Join(dir, "monitor.sock"), func(p string) (*net.UnixConn, error) {
		return net.DialUnix("unix", nil, &net.UnixAddr{Name: p, Net: "unix"})
	})
	if err != nil {
		return fmt.Errorf("container monitor: %v: %w", err, errdefs.ErrUnavailable)
	}
	defer c.Close()
	b, _ := json.Marshal(credsOf(pp))
	if _, _, err := c.WriteMsgUnix(b, unix.UnixRights(listener), nil); err != nil {
		return fmt.Errorf("container monitor: %v: %w", err, errdefs.ErrUnavailable)
	}
	_ = c.SetReadDeadline(time.Now().Add(setupTimeout))
	ack := make([]byte, 4096)
	n, _ := c.Read(ack)
	if string(ack[:n]) != "ok" {
		return fmt.Errorf("container monitor: %s: %w", ack[:n], errdefs.ErrUnavailable)
	}
	return nil
}

// withShortPath calls f with a path naming file that fits a unix socket
// address (108 bytes): through /proc/self/fd of its directory.
func withShortPath[T any](file string, f func(string) (T, error)) (T, error) {
	dir, err := unix.Open(filepath.Dir(file), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		var zero T
		return zero, err
	}
	defer unix.Close(dir)
	return f(fmt.Sprintf("/proc/self/fd/%d/%s", dir, filepath.Base(file)))
}

func peerIsRoot(c *net.UnixConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	_ = raw.Control(func(fd uintptr) {
		cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		ok = err == nil && cred.Uid == 0
	})
	return ok
}
