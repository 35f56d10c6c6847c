package microvm

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/sandbox"
)

// JailCommand is the hidden airlock command that confines the VMM before
// it execs it (cmd/airlock registers it): started in new mount, PID,
// network, IPC and UTS namespaces and in the VM's cgroup, it mounts a
// fresh /proc (no host process is visible, so none can be ptraced),
// hides what the policy denies inside shared trees and every other VM's
// directory, empties the capability bounding set, sets no_new_privs and
// execs the VMM, which adds its own seccomp filter (-sandbox on). A VM
// escape lands in a process that sees no other process, has no network
// and no capability, and cannot read the files the sandbox was denied.
const JailCommand = "__vmmjail"

// jailSpec is the helper's instructions (one JSON argument).
type jailSpec struct {
	Scratch string   `json:"scratch"` // an empty directory of the VM's (the helper's tmpfs)
	Deny    []string `json:"deny,omitempty"`
	// Hide is a directory replaced by an empty one, except Keep (the VM's
	// own directory below it), bound back.
	Hide string `json:"hide,omitempty"`
	Keep string `json:"keep,omitempty"`
	// Cgroups are the directories the helper joins (writes itself to
	// cgroup.procs) before it execs the VMM.
	Cgroups []string `json:"cgroups,omitempty"`
	Argv    []string `json:"argv"` // the VMM's argv; argv[0] absolute
	// Root, when set, replaces Hide and Keep: the VMM runs in a root of
	// its own, as no host user (see jailRoot). Deny paths are then
	// where the VMM sees them.
	Root *jailRoot `json:"root,omitempty"`
}

// jailCommand returns the command that starts bin args confined as m
// says, and what to release once it started.
func jailCommand(agentBin, bin string, args []string, m *Machine, root *jailRoot) (*exec.Cmd, func(), error) {
	// The scratch mount point is shared by every VM (each jail mounts its
	// own tmpfs there, in its own mount namespace) and lies outside the
	// VMs' directory, which the jail hides.
	scratch := filepath.Join(filepath.Dir(filepath.Dir(m.Dir)), "jail")
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return nil, nil, fmt.Errorf("jail: %v: %w", err, sandbox.ErrUnavailable)
	}
	spec := jailSpec{Scratch: scratch, Deny: m.Deny, Hide: filepath.Dir(m.Dir), Keep: m.Dir, Cgroups: m.Cgroups, Argv: append([]string{bin}, args...)}
	if root != nil {
		spec.Hide, spec.Keep, spec.Root = "", "", root
	}
	raw, _ := json.Marshal(spec)
	cmd := exec.Command(agentBin, JailCommand, string(raw))
	cmd.Env = []string{}
	cmd.Stdin = nil
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS,
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
	}
	return cmd, func() {}, nil
}

// JailMain is the helper (see JailCommand). It returns only on failure.
func JailMain(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: airlock "+JailCommand+" SPEC (internal)")
		return 2
	}
	runtime.LockOSThread() // capability sets and no_new_privs are per thread
	if len(args) > 1 && args[0] == dropSpec {
		return dropMain(args[1:])
	}
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: airlock "+JailCommand+" SPEC (internal)")
		return 2
	}
	if args[0] == holdSpec {
		return holdMain()
	}
	var s jailSpec
	if err := json.Unmarshal([]byte(args[0]), &s); err != nil || len(s.Argv) == 0 || !filepath.IsAbs(s.Argv[0]) {
		fmt.Fprintln(os.Stderr, "airlock "+JailCommand+": bad spec")
		return 2
	}
	if err := jail(&s); err != nil {
		fmt.Fprintf(os.Stderr, "airlock %s: %v\n", JailCommand, err)
		return 125
	}
	if s.Root != nil {
		return runVMM(s.Argv, s.Root)
	}
	err := unix.Exec(s.Argv[0], s.Argv, []string{})
	fmt.Fprintf(os.Stderr, "airlock %s: exec %s: %v\n", JailCommand, s.Argv[0], err)
	return 127
}

func jail(s *jailSpec) error {
	if os.Getpid() != 1 {
		return errors.New("not in a new PID namespace")
	}
	for _, d := range s.Cgroups {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte("0"), 0); err != nil {
			return fmt.Errorf("join cgroup %s: %w", d, err)
		}
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("private mounts: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	if err := unix.Mount("jail", s.Scratch, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=700,size=64k"); err != nil {
		return fmt.Errorf("scratch tmpfs: %w", err)
	}
	denyDir, denyFile := filepath.Join(s.Scratch, "deny-dir"), filepath.Join(s.Scratch, "deny-file")
	if err := os.Mkdir(denyDir, 0); err != nil {
		return err
	}
	if err := os.WriteFile(denyFile, nil, 0); err != nil {
		return err
	}
	if s.Root != nil {
		root := filepath.Join(s.Scratch, "root")
		if err := os.Mkdir(root, 0o755); err != nil {
			return err
		}
		if err := buildRoot(root, s.Root, s.Deny, denyDir, denyFile); err != nil {
			return err
		}
	} else if err := hideAndKeep(s, denyDir, denyFile); err != nil {
		return err
	}
	return dropCaps()
}

// dropCaps empties the bounding, inheritable and ambient capability sets
// and sets no_new_privs (of the calling thread: lock it first).
func dropCaps() error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var caps [2]unix.CapUserData
	if err := unix.Capget(&hdr, &caps[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	caps[0].Inheritable, caps[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &caps[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	return nil
}

func bindReadOnly(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	return unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
}

// hideAndKeep hides s.Deny and every other VM's directory in the host's
// tree (the VMM without a root of its own: Firecracker's driver).
func hideAndKeep(s *jailSpec, denyDir, denyFile string) error {
	for _, d := range s.Deny {
		st, err := os.Stat(d)
		if err != nil {
			continue // nothing there to hide
		}
		src := denyFile
		if st.IsDir() {
			src = denyDir
		}
		if err := bindReadOnly(src, d); err != nil {
			return fmt.Errorf("deny %s: %w", d, err)
		}
	}
	if s.Hide != "" && s.Keep != "" {
		self := filepath.Join(s.Scratch, "self")
		if err := os.Mkdir(self, 0o700); err != nil {
			return err
		}
		if err := unix.Mount(s.Keep, self, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("keep %s: %w", s.Keep, err)
		}
		if err := unix.Mount("vms", s.Hide, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=700,size=64k"); err != nil {
			return fmt.Errorf("hide %s: %w", s.Hide, err)
		}
		if err := os.Mkdir(s.Keep, 0o700); err != nil {
			return err
		}
		if err := unix.Mount(self, s.Keep, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("keep %s: %w", s.Keep, err)
		}
	}
	return nil
}
