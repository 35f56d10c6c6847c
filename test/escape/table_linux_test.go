package escape

// The attack table: every attack of the suite, what escaping means for it,
// and how it is run on each side.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// side is where an attack runs: unconfined on the host (the proof) or
// inside a sandbox.
type side struct {
	inside bool
	ws     string // the run's workspace (same path inside)
	token  string // unique per run (names the sleepers of outlive attacks)
	f      *fixture
	hits   []string // bait services reached during this run
	// neighbourSecret is a file in another live sandbox's workspace
	// (attacks with neighbour set).
	neighbourSecret string
	// rootCaps: root inside holds rootCapabilities over its own
	// namespace (an image sandbox with its own host id range).
	rootCaps bool
}

// rootCapMask is the effective set root inside an image sandbox with its
// own id range holds (native's rootCapabilities: CHOWN, DAC_OVERRIDE,
// FOWNER, FSETID, KILL, SETGID, SETUID, SETPCAP, NET_BIND_SERVICE,
// SETFCAP), all over its own namespace only: the attacks that follow
// try what they could reach.
const rootCapMask = "800005fb"

// agentPids are the processes an attack on the agent aims at: the agent
// (PID 1 and the parent) inside, a stand-in victim on the host.
func (s *side) agentPids() string {
	if s.inside {
		return "1,ppid"
	}
	return strconv.Itoa(s.f.standIn.cmd.Process.Pid)
}

// capped picks the exhaustion cap: big inside (a sandbox without the limit
// shows as escaped), small on the host (proves the mechanism safely).
func (s *side) capped(inside, host int) string {
	if s.inside {
		return strconv.Itoa(inside)
	}
	return strconv.Itoa(host)
}

type attackDef struct {
	name     string
	category string // files, processes, kernel, network, self-defence
	goal     string // what "escaped" means
	cmd      string // attacks subcommand
	args     func(s *side) []string
	tty      bool   // the unconfined proof runs on a terminal it controls
	wasi     string // "" when the attack is meaningless as a WASI program: why not; "yes" when it runs in wasm
	exhaust  bool   // resource exhaustion: host and neighbour health checked after
	// allowlist runs the attack with network through the egress proxy
	// (allowlist: example.com:443) instead of the default profile's none.
	allowlist bool
	// race runs the host's file writer (the Files API inside, os on the
	// host) against the attack while it runs.
	race bool
	// neighbour starts another sandbox first, with a secret in its
	// workspace, for cross-sandbox attacks.
	neighbour bool
	outlive   bool // decided after destroy by looking for its sleepers on the host
	setup     func(s *side) error
	// pinned names a file the sandbox is told to pin (its policy file).
	pinned func(s *side) string
	// check is the attack-specific host evidence (besides the generic
	// integrity, bait-service and workspace checks): escaped or not.
	check func(s *side) (bool, string)
}

func kv(pairs ...string) []string { return pairs }

const escData = "data=\n# airlock-escape\n"

// writeAttack writes a file at path(s).
func writeAttack(name, cat, goal string, path func(s *side) string, mkdirs bool) attackDef {
	return attackDef{name: name, category: cat, goal: goal, cmd: "write", wasi: "yes",
		args: func(s *side) []string {
			a := kv("path="+path(s), escData)
			if mkdirs {
				a = append(a, "mkdirs=1")
			}
			return a
		},
		check: func(s *side) (bool, string) {
			b, err := os.ReadFile(path(s))
			return err == nil && strings.Contains(string(b), "airlock-escape"), "host file " + path(s)
		}}
}

func ws(rel string) func(s *side) string {
	return func(s *side) string { return filepath.Join(s.ws, rel) }
}

// wsChanged is the check of workspace-protection attacks.
func wsChanged(s *side) (bool, string) {
	bad := workspaceChanges(s.ws)
	return len(bad) > 0, strings.Join(bad, "; ")
}

func allAttacks() []attackDef {
	noProc := "WASI preview 1 has no processes, signals, /proc or ptrace"
	noSys := "a WASI module reaches only the WASI functions the host exports, no raw system calls"
	noNet := "WASI preview 1 has no sockets and the wasm backend exports none"
	noTTY := "WASI has no terminals or ioctl"
	return append([]attackDef{
		// ---- files ----
		{name: "read-ssh-key", category: "files", goal: "read the host user's ~/.ssh/id_rsa", cmd: "read", wasi: "yes",
			args: func(s *side) []string { return kv("path="+s.f.sshKey, "token="+s.f.token) }},
		{name: "read-etc-shadow", category: "files", goal: "read /etc/shadow", cmd: "read", wasi: "yes",
			args: func(s *side) []string { return kv("path=/etc/shadow") }},
		{name: "read-other-home", category: "files", goal: "read another user's home (/home/...)", cmd: "read", wasi: "yes",
			args: func(s *side) []string { return kv("path="+s.f.otherKey, "token="+s.f.token) }},
		{name: "read-server-data", category: "files", goal: "read the server's data dir (/var/lib/...)", cmd: "read", wasi: "yes",
			args: func(s *side) []string { return kv("path="+s.f.dataFile, "token="+s.f.token) }},
		{name: "list-host-home", category: "files", goal: "list the host user's home", cmd: "list", wasi: "yes",
			args: func(s *side) []string { return kv("path="+s.f.home, "want=.ssh") }},
		{name: "dotdot-traversal", category: "files", goal: "read a host secret by walking up from the workspace with ..", cmd: "read", wasi: "yes",
			args: func(s *side) []string {
				return kv("path="+s.ws+strings.Repeat("/..", strings.Count(s.ws, "/"))+s.f.dataFile, "token="+s.f.token)
			}},
		{name: "symlink-relative-out", category: "files", goal: "read a host secret through a relative symlink (../../..) made in the workspace", cmd: "symlink-read", wasi: "yes",
			args: func(s *side) []string {
				rel := strings.Repeat("../", strings.Count(s.ws, "/")) + strings.TrimPrefix(s.f.dataFile, "/")
				return kv("target="+rel, "link="+filepath.Join(s.ws, "link-rel"), "token="+s.f.token)
			}},
		{name: "proc-self-root", category: "files", goal: "read a host secret via /proc/self/root", cmd: "read", wasi: "yes",
			args: func(s *side) []string { return kv("path=/proc/self/root"+s.f.dataFile, "token="+s.f.token) }},
		{name: "proc-pid-root", category: "files", goal: "read a host secret via another process's /proc/<pid>/root (PID 1 inside)", cmd: "read", wasi: "yes",
			args: func(s *side) []string {
				pid := "1"
				if !s.inside {
					pid = s.f.victimPid()
				}
				return kv("path=/proc/"+pid+"/root"+s.f.dataFile, "token="+s.f.token)
			}},
		writeAttack("write-outside-workspace", "files", "create a file in a host dir outside the workspace",
			func(s *side) string { return filepath.Join(s.f.outside, "pwned") }, false),
		writeAttack("write-etc", "files", "create a file in /etc",
			func(s *side) string { return s.f.etcFile }, false),
		writeAttack("write-host-shell-rc", "files", "append to the host user's ~/.bashrc",
			func(s *side) string { return s.f.hostRC }, false),
		withCheck(writeAttack("write-git-hook-existing", "files", "modify .git/hooks/pre-commit in the workspace", ws(".git/hooks/pre-commit"), false), wsChanged),
		withCheck(writeAttack("write-git-hook-new", "files", "create .git/hooks/post-checkout in the workspace", ws(".git/hooks/post-checkout"), false), wsChanged),
		withCheck(writeAttack("write-git-config", "files", "modify .git/config (core.hooksPath, fsmonitor)", ws(".git/config"), false), wsChanged),
		withCheck(writeAttack("write-shell-rc-existing", "files", "modify the workspace's .bashrc", ws(".bashrc"), false), wsChanged),
		withCheck(writeAttack("write-shell-rc-new", "files", "create .zshrc in the workspace", ws(".zshrc"), false), wsChanged),
		withCheck(writeAttack("write-agent-settings-existing", "files", "modify .claude/settings.json (agent hooks)", ws(".claude/settings.json"), false), wsChanged),
		withCheck(writeAttack("write-agent-settings-new", "files", "create .vscode/settings.json", ws(".vscode/settings.json"), true), wsChanged),
		{name: "symlink-read-out", category: "files", goal: "read a host secret through a symlink made in the workspace", cmd: "symlink-read", wasi: "yes",
			args: func(s *side) []string {
				return kv("target="+s.f.dataFile, "link="+filepath.Join(s.ws, "link-data"), "token="+s.f.token)
			}},
		{name: "symlink-write-out", category: "files", goal: "write outside through a symlinked directory", cmd: "symlink-write", wasi: "yes",
			args: func(s *side) []string {
				return kv("target="+s.f.outside, "link="+filepath.Join(s.ws, "link-outside"), "file=pwned", escData)
			},
			check: func(s *side) (bool, string) {
				ents, _ := os.ReadDir(s.f.outside)
				return len(ents) > 0, "entries in " + s.f.outside
			}},
		{name: "symlink-protected", category: "files", goal: "create a protected git hook through a symlink", cmd: "symlink-write", wasi: "yes",
			args: func(s *side) []string {
				return kv("target="+filepath.Join(s.ws, ".git/hooks/post-merge"), "link="+filepath.Join(s.ws, "innocent"), escData)
			}, check: wsChanged},
		{name: "hardlink-protected", category: "files", goal: "modify .git/config through a hard link", cmd: "hardlink-write", wasi: "yes",
			args: func(s *side) []string {
				return kv("src="+filepath.Join(s.ws, ".git/config"), "link="+filepath.Join(s.ws, "config-alias"), escData)
			}, check: wsChanged},
		{name: "hardlink-out", category: "files", goal: "read a host secret through a hard link", cmd: "hardlink-read", wasi: "yes",
			args: func(s *side) []string {
				return kv("src="+s.f.dataFile, "link="+filepath.Join(s.ws, "hl-data"), "token="+s.f.token)
			}},
		{name: "rename-protected-parent", category: "files", goal: "rename .git away, edit the hook, rename back", cmd: "rename-parent", wasi: "yes",
			args: func(s *side) []string {
				return kv("dir="+filepath.Join(s.ws, ".git"), "moved="+filepath.Join(s.ws, "git-moved"), "rel=hooks/pre-commit", escData)
			}, check: wsChanged},
		{name: "rmdir-protected-parent", category: "files", goal: "delete .git/hooks and recreate it with a hook", cmd: "rmdir-parent", wasi: "yes",
			args: func(s *side) []string {
				return kv("dir="+filepath.Join(s.ws, ".git/hooks"), "file=pre-commit", escData)
			}, check: wsChanged},
		{name: "read-other-sandbox", category: "files", goal: "read a file in another running sandbox's workspace", cmd: "read", wasi: "yes", neighbour: true,
			args: func(s *side) []string { return kv("path="+s.neighbourSecret, "token="+s.f.token) }},
		{name: "files-api-symlink-race", category: "files", goal: "make the host's Files API write outside by swapping a directory for a symlink while it writes", cmd: "swap", wasi: "yes", race: true,
			args: func(s *side) []string {
				return kv("dir="+filepath.Join(s.ws, "race"), "target="+s.f.outside, "ms=3000")
			},
			check: func(s *side) (bool, string) {
				ents, _ := os.ReadDir(s.f.outside)
				if len(ents) > 0 {
					return true, fmt.Sprintf("%d files written into %s through the swapped link (first: %s)", len(ents), s.f.outside, ents[0].Name())
				}
				return false, "nothing reached " + s.f.outside
			}},
		{name: "open-by-handle-at", category: "files", goal: "open a host file by its handle (shocker)", cmd: "open-by-handle", wasi: noSys,
			args: func(s *side) []string {
				return kv("mount="+s.ws, "handle="+s.f.handle, "type="+strconv.Itoa(s.f.handleType), "token="+s.f.token)
			}},

		// ---- processes ----
		{name: "ptrace-host-process", category: "processes", goal: "ptrace a host process", cmd: "ptrace", wasi: noProc,
			args: func(s *side) []string { return kv("pids="+s.f.victimPid(), "token="+s.f.token) }},
		{name: "proc-mem-host-process", category: "processes", goal: "open /proc/<host pid>/mem for writing", cmd: "proc-mem", wasi: noProc,
			args: func(s *side) []string { return kv("pids="+s.f.victimPid(), "token="+s.f.token) }},
		{name: "proc-environ-host-process", category: "processes", goal: "read a host process's environment", cmd: "proc-environ", wasi: noProc,
			args: func(s *side) []string { return kv("pids="+s.f.victimPid(), "token="+s.f.token) }},
		{name: "process-vm-writev", category: "processes", goal: "write into a host process's memory", cmd: "vm-writev", wasi: noProc,
			args:  func(s *side) []string { return kv("pid="+s.f.victimPid(), "token="+s.f.token) },
			check: func(s *side) (bool, string) { return s.f.marker("mem-written") }},
		{name: "pidfd-getfd", category: "processes", goal: "steal a host process's open file with pidfd_getfd", cmd: "pidfd-getfd", wasi: noProc,
			args: func(s *side) []string {
				return kv("pid="+s.f.victimPid(), "fd="+strconv.Itoa(s.f.victim.secretFD), "token="+s.f.token)
			}},
		{name: "signal-host-process", category: "processes", goal: "signal a process outside", cmd: "signal", wasi: noProc,
			args:  func(s *side) []string { return kv("pid="+s.f.victimPid(), "token="+s.f.token) },
			check: func(s *side) (bool, string) { return s.f.marker("sigusr1") }},
		{name: "see-host-processes", category: "processes", goal: "see host processes in /proc", cmd: "ps", wasi: noProc,
			args: func(s *side) []string { return kv("token=" + s.f.token) }},
		{name: "outlive-double-fork", category: "processes", goal: "leave a process running after destroy (double fork)", cmd: "outlive", wasi: noProc, outlive: true,
			args: func(s *side) []string { return kv("mode=double-fork", "token="+s.token) }},
		{name: "outlive-setsid", category: "processes", goal: "leave a process running after destroy (setsid)", cmd: "outlive", wasi: noProc, outlive: true,
			args: func(s *side) []string { return kv("mode=setsid", "token="+s.token) }},
		{name: "outlive-daemon", category: "processes", goal: "leave a daemon running after destroy (setsid + double fork + chdir /)", cmd: "outlive", wasi: noProc, outlive: true,
			args: func(s *side) []string { return kv("mode=daemon", "token="+s.token) }},
		{name: "tiocsti", category: "processes", goal: "push input into a terminal outside (TIOCSTI)", cmd: "tiocsti", wasi: noTTY, tty: true,
			args: func(s *side) []string { return nil }},
		{name: "tioclinux", category: "processes", goal: "drive the host's virtual console (TIOCLINUX)", cmd: "tioclinux", wasi: noTTY,
			args: func(s *side) []string { return nil }},

		// ---- kernel surface ----
		{name: "userns-create", category: "kernel", goal: "create a nested user namespace", cmd: "userns-create", wasi: noSys,
			args: func(s *side) []string { return nil }},
		{name: "userns-umount", category: "kernel", goal: "in a new user+mount namespace, unmount an inherited mount (reveal what it hides)", cmd: "ns", wasi: noSys,
			args: func(s *side) []string { return kv("op=umount", "userns=1") }},
		{name: "userns-remount", category: "kernel", goal: "in a new user+mount namespace, remount a read-only mount read-write", cmd: "ns", wasi: noSys,
			args: func(s *side) []string { return kv("op=remount", "userns=1") }},
		{name: "userns-pivot-root", category: "kernel", goal: "in a new user+mount namespace, mount a tmpfs and pivot_root into it", cmd: "ns", wasi: noSys,
			args: func(s *side) []string { return kv("op=pivot", "userns=1") }},
		{name: "mount", category: "kernel", goal: "mount a filesystem", cmd: "ns", wasi: noSys,
			args: func(s *side) []string { return kv("op=tmpfs") }},
		{name: "new-mount-api", category: "kernel", goal: "fsopen/fsmount or open_tree(OPEN_TREE_CLONE)", cmd: "ns", wasi: noSys,
			args: func(s *side) []string { return kv("op=mount-api") }},
		{name: "bpf", category: "kernel", goal: "create a BPF map", cmd: "bpf", wasi: noSys, args: noArgs},
		{name: "perf-event-open", category: "kernel", goal: "open a perf event", cmd: "perf", wasi: noSys, args: noArgs},
		{name: "userfaultfd", category: "kernel", goal: "get a userfaultfd", cmd: "userfaultfd", wasi: noSys, args: noArgs},
		{name: "io-uring-setup", category: "kernel", goal: "set up an io_uring", cmd: "io-uring-setup", wasi: noSys, args: noArgs},
		{name: "io-uring-socket", category: "kernel", goal: "create an AF_VSOCK/AF_PACKET socket with IORING_OP_SOCKET (past a socket() filter)", cmd: "io-uring-socket", wasi: noSys, args: noArgs},
		{name: "keyctl", category: "kernel", goal: "add a key to a kernel keyring", cmd: "keyctl", wasi: noSys, args: noArgs},
		{name: "module-load", category: "kernel", goal: "reach the kernel module loader (finit_module)", cmd: "module-load", wasi: noSys,
			args: func(s *side) []string {
				if s.inside {
					return nil
				}
				return kv("unconfined=1")
			}},
		{name: "memfd-execveat", category: "kernel", goal: "run code from an anonymous memfd (memfd_create + execveat)", cmd: "memfd-exec", wasi: noSys, args: noArgs},
		{name: "setuid-binary", category: "kernel", goal: "gain another user's identity through a set-user-ID binary", cmd: "setuid", wasi: noSys,
			args: func(s *side) []string { return kv("exe=" + filepath.Join(s.ws, "suid-attacks")) },
			setup: func(s *side) error {
				p := filepath.Join(s.ws, "suid-attacks")
				if err := copyFile(s.f.attacksBin, p, 0o755); err != nil {
					return err
				}
				if err := os.Chown(p, 12345, 12345); err != nil {
					return err
				}
				return os.Chmod(p, 0o755|os.ModeSetuid)
			}},
		{name: "capabilities", category: "kernel", goal: "hold any effective capability (root inside with its own id range: any beyond its namespace's default set)", cmd: "caps", wasi: noSys,
			args: func(s *side) []string {
				if s.rootCaps {
					return kv("allowed=" + rootCapMask)
				}
				return nil
			}},
		{name: "mknod-device", category: "kernel", goal: "mknod a device node (/dev/kmsg, the disk) and read the host through it", cmd: "mknod-disk", wasi: noSys,
			args: func(s *side) []string { return kv("dir=" + s.ws) }},
		{name: "sysctl-write", category: "kernel", goal: "write a host-global sysctl (/proc/sys/vm/swappiness, its own value)", cmd: "sysctl-write", wasi: noSys, args: noArgs},
		{name: "cgroup-escape", category: "kernel", goal: "move itself to the root cgroup", cmd: "cgroup-escape", wasi: noSys, args: noArgs},

		// ---- network ----
		{name: "tcp-direct", category: "network", goal: "open a TCP connection to the host's address, ignoring the proxy", cmd: "tcp", wasi: noNet, allowlist: true,
			args:  func(s *side) []string { return kv("addrs="+s.f.tcpAddr, "token="+s.f.token) },
			check: serviceReached("tcp")},
		{name: "udp-direct", category: "network", goal: "send a UDP datagram out and get an answer", cmd: "udp", wasi: noNet, allowlist: true,
			args:  func(s *side) []string { return kv("addr="+s.f.udpAddr, "token="+s.f.token) },
			check: serviceReached("udp")},
		{name: "dns-exfiltration", category: "network", goal: "get a DNS query carrying a secret answered", cmd: "dns", wasi: noNet, allowlist: true,
			args:  func(s *side) []string { return kv("servers="+s.f.dnsAddr, "token="+s.f.token) },
			check: serviceReached("dns")},
		{name: "af-packet", category: "network", goal: "open a raw AF_PACKET socket", cmd: "af-packet", wasi: noNet, allowlist: true, args: noArgs},
		{name: "af-netlink", category: "network", goal: "see the host's network interfaces over netlink", cmd: "netlink", wasi: noNet, allowlist: true,
			args: func(s *side) []string { return kv("iface=" + s.f.iface) }},
		{name: "af-vsock", category: "network", goal: "open an AF_VSOCK socket (no netns confines it)", cmd: "vsock", wasi: noNet, allowlist: true, args: noArgs},
		{name: "unix-docker-sock", category: "network", goal: "connect to docker.sock", cmd: "unix", wasi: noNet, allowlist: true,
			args: func(s *side) []string {
				return kv("paths=" + s.f.dockerSock + ",/var/run/docker.sock,/run/docker.sock")
			},
			check: serviceReached("docker.sock")},
		{name: "unix-ssh-agent", category: "network", goal: "connect to the user's ssh-agent", cmd: "unix", wasi: noNet, allowlist: true,
			args:  func(s *side) []string { return kv("paths=" + s.f.sshSock) },
			check: serviceReached("ssh-agent")},
		{name: "unix-dbus", category: "network", goal: "connect to D-Bus", cmd: "unix", wasi: noNet, allowlist: true,
			args:  func(s *side) []string { return kv("paths=" + s.f.dbusSock + ",/run/dbus/system_bus_socket") },
			check: serviceReached("dbus")},
		{name: "unix-abstract", category: "network", goal: "connect to a host abstract unix socket", cmd: "unix", wasi: noNet, allowlist: true,
			args:  func(s *side) []string { return kv("paths=" + s.f.abstract) },
			check: serviceReached("abstract")},
		{name: "host-loopback", category: "network", goal: "reach a service on the host's 127.0.0.1", cmd: "tcp", wasi: noNet, allowlist: true,
			args:  func(s *side) []string { return kv("addrs="+s.f.loopAddr, "token="+s.f.token) },
			check: serviceReached("loopback")},
		{name: "proxy-connect-none", category: "network", goal: "tunnel to the host through an in-sandbox proxy under network: none", cmd: "proxy-connect", wasi: noNet,
			args: func(s *side) []string {
				proxy := "127.0.0.1:3128"
				if !s.inside {
					proxy = s.f.proxyAddr
				}
				return kv("proxy="+proxy, "target="+s.f.tcpAddr, "token="+s.f.token)
			},
			check: serviceReached("tcp")},
		{name: "proxy-connect-host", category: "network", goal: "CONNECT through the egress proxy to the host's address (not allowed, private)", cmd: "proxy-connect", wasi: noNet, allowlist: true,
			args: func(s *side) []string {
				proxy := "127.0.0.1:3128"
				if !s.inside {
					proxy = s.f.proxyAddr
				}
				return kv("proxy="+proxy, "target="+s.f.tcpAddr, "token="+s.f.token)
			},
			check: serviceReached("tcp")},
		{name: "proxy-connect-loopback", category: "network", goal: "CONNECT through the egress proxy to 127.0.0.1 (the host's loopback service)", cmd: "proxy-connect", wasi: noNet, allowlist: true,
			args: func(s *side) []string {
				proxy := "127.0.0.1:3128"
				if !s.inside {
					proxy = s.f.proxyAddr
				}
				return kv("proxy="+proxy, "target="+s.f.loopAddr, "token="+s.f.token)
			},
			check: serviceReached("loopback")},
		{name: "proxy-connect-api", category: "network", goal: "CONNECT through the egress proxy to the server's API on the host's loopback", cmd: "proxy-connect", wasi: noNet, allowlist: true,
			args: func(s *side) []string {
				proxy := "127.0.0.1:3128"
				if !s.inside {
					proxy = s.f.proxyAddr
				}
				return kv("proxy="+proxy, "target="+s.f.apiLoop, "token=GET /v1/sandboxes HTTP/1.0\r\n")
			},
			check: apiReached},

		// ---- self-defence ----
		{name: "kill-agent", category: "self-defence", goal: "SIGKILL the in-sandbox agent", cmd: "kill", wasi: noProc,
			args: func(s *side) []string { return kv("pids=" + s.agentPids()) }},
		{name: "crash-agent-kill", category: "self-defence", goal: "crash the agent with fault and termination signals from kill(2) (SIGSEGV, SIGABRT, SIGTERM, ...)", cmd: "crash", wasi: noProc,
			args: func(s *side) []string { return kv("how=kill", "pids="+s.agentPids()) }},
		{name: "crash-agent-sigqueue", category: "self-defence", goal: "crash the agent with a SIGSEGV that looks like a fault (rt_sigqueueinfo, SI_QUEUE)", cmd: "crash", wasi: noProc,
			args: func(s *side) []string { return kv("how=sigqueue", "pids="+s.agentPids()) }},
		{name: "crash-agent-pidfd", category: "self-defence", goal: "crash the agent with a SIGSEGV that looks like a fault (pidfd_send_signal with a siginfo)", cmd: "crash", wasi: noProc,
			args: func(s *side) []string { return kv("how=pidfd", "pids="+s.agentPids()) }},
		{name: "crash-agent-fsetsig", category: "self-defence", goal: "crash the agent with a kernel-sent SIGSEGV (F_SETOWN + F_SETSIG on a pipe)", cmd: "crash", wasi: noProc,
			args: func(s *side) []string { return kv("how=fsetsig", "pids="+s.agentPids()) }},
		{name: "ptrace-agent", category: "self-defence", goal: "ptrace the agent", cmd: "ptrace", wasi: noProc,
			args: func(s *side) []string { return kv("pids=" + s.agentPids()) }},
		{name: "agent-mem", category: "self-defence", goal: "open the agent's /proc/<pid>/mem", cmd: "proc-mem", wasi: noProc,
			args: func(s *side) []string { return kv("pids=" + s.agentPids()) }},
		{name: "agent-environ", category: "self-defence", goal: "read the agent's environment", cmd: "proc-environ", wasi: noProc,
			args: func(s *side) []string { return kv("pids=" + s.agentPids()) }},
		{name: "agent-channel", category: "self-defence", goal: "get hold of the agent's control channel (inherited fd, /proc/<pid>/fd, pidfd_getfd)", cmd: "fd-channel", wasi: noProc,
			args: func(s *side) []string { return kv("pids=" + s.agentPids()) }},
		{name: "replace-agent-binary", category: "self-defence", goal: "overwrite or replace the agent's binary", cmd: "replace-binary", wasi: noProc,
			args: func(s *side) []string {
				if s.inside {
					return kv("paths="+s.f.agentBin, "proc1=1")
				}
				return kv("paths=" + s.f.standInBin)
			},
			check: func(s *side) (bool, string) {
				if s.inside {
					return fileSum(s.f.agentBin) != s.f.agentSum, "agent binary " + s.f.agentBin
				}
				return fileSum(s.f.standInBin) != s.f.agentSum, "stand-in binary " + s.f.standInBin
			}},
		writeAttack("policy-file-edit", "self-defence", "edit the host's policy file (~/.config/airlock/policy.yaml)",
			func(s *side) string { return s.f.policyCfg }, false),
		{name: "policy-file-replace", category: "self-defence", goal: "replace the host's policy file by rename", cmd: "replace-binary", wasi: noProc,
			args: func(s *side) []string { return kv("paths=" + s.f.policyCfg) },
			check: func(s *side) (bool, string) {
				b, _ := os.ReadFile(s.f.policyCfg)
				return strings.Contains(string(b), "airlock-escape"), "policy file " + s.f.policyCfg
			}},
		{name: "env-secret-leak", category: "self-defence", goal: "find a host secret (GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY) in its environment", cmd: "env-leak", wasi: "yes",
			args: func(s *side) []string { return kv("token=" + s.f.token) }},
		{name: "api-widen-policy", category: "self-defence", goal: "call the server API to widen its own policy", cmd: "http", wasi: noNet, allowlist: true,
			args: func(s *side) []string {
				return kv("urls=http://"+s.f.apiLoop+"/v1/sandboxes/self/policy,http://"+s.f.apiHost+"/v1/sandboxes/self/policy",
					"method=PATCH", `body={"network":{"mode":"open"},"filesystem":{"read_write":["/"]}}`)
			},
			check: apiReached},
		{name: "api-create-unconfined", category: "self-defence", goal: "call the server API to create an unconfined sandbox", cmd: "http", wasi: noNet, allowlist: true,
			args: func(s *side) []string {
				return kv("urls=http://"+s.f.apiLoop+"/v1/sandboxes,http://"+s.f.apiHost+"/v1/sandboxes",
					"method=POST", `body={"backend":"native","policy":{"filesystem":{"read_write":["/"]},"network":{"mode":"open"}}}`)
			},
			check: apiReached},
		{name: "api-via-proxy", category: "self-defence", goal: "call the server API on the host's loopback through the egress proxy (HTTP forward proxying)", cmd: "http", wasi: noNet, allowlist: true,
			args: func(s *side) []string {
				proxy := "http://127.0.0.1:3128"
				if !s.inside {
					proxy = "http://" + s.f.proxyAddr
				}
				return kv("urls=http://"+s.f.apiLoop+"/v1/sandboxes", "method=POST", "proxy="+proxy, `body={"policy":{"network":{"mode":"open"}}}`)
			},
			check: apiReached},
		{name: "fork-bomb", category: "self-defence", goal: "exhaust the host's processes", cmd: "forkbomb", wasi: noProc, exhaust: true,
			args: func(s *side) []string { return kv("cap=" + s.capped(8192, 32)) }},
		{name: "memory-bomb", category: "self-defence", goal: "exhaust the host's memory", cmd: "memory", wasi: "yes", exhaust: true,
			args: func(s *side) []string { return kv("cap_mb=" + s.capped(6144, 64)) }},
		{name: "disk-fill-tmp", category: "self-defence", goal: "fill the disk through /tmp", cmd: "disk-fill", wasi: "yes", exhaust: true,
			args: func(s *side) []string { return kv("dir=/tmp", "cap_mb="+s.capped(4096, 16)) }},
		{name: "fd-exhaustion", category: "self-defence", goal: "exhaust file descriptors", cmd: "fds", wasi: "yes", exhaust: true,
			args: func(s *side) []string { return kv("path="+s.ws, "cap="+s.capped(1<<20, 256)) }},
		{name: "output-flood", category: "self-defence", goal: "flood the host with output", cmd: "flood", wasi: "yes", exhaust: true,
			args: func(s *side) []string { return kv("cap_mb=" + s.capped(2048, 8)) }},
	}, plantAttacks()...)
}

// plantDepths are where the planting attacks aim: a repository one and
// three directories below the workspace root (prepareWorkspace makes them).
var plantDepths = map[string]string{"d1": "a", "d3": "a/b/c"}

// plantGoals says what each planting kind tries, and which host file shows
// it worked (with the marker; "" for the set-id kinds, checked by mode).
var plantGoals = map[string]struct{ goal, evidence string }{
	"hook":            {"plant a git hook in a nested repository", ".git/hooks/post-checkout"},
	"git-config":      {"add core.fsmonitor to a nested repository's config", ".git/config"},
	"config-rename":   {"replace a nested repository's config by renaming a file onto it", ".git/config"},
	"new-repo":        {"create a new repository with its own config (git init, then edit)", "new/.git/config"},
	"bare-repo":       {"assemble a bare repository with its own config", "bare.git/config"},
	"envrc":           {"plant a .envrc that direnv runs", ".envrc"},
	"vscode-tasks":    {"plant .vscode/tasks.json (runs on folder open)", ".vscode/tasks.json"},
	"vscode-swap":     {"bring .vscode/settings.json by renaming a directory into place", ".vscode/settings.json"},
	"claude-settings": {"plant .claude/settings.json (hooks run by the agent host)", ".claude/settings.json"},
	"mcp-json":        {"plant .mcp.json (MCP servers the agent host starts)", ".mcp.json"},
	"set-uid":         {"leave a set-uid file for host users", ""},
	"set-gid-dir":     {"leave a set-gid directory", ""},
	"pinned-policy":   {"rewrite the policy file the sandbox runs under (open its network)", "agent.yaml"},
}

// plantAttacks are the workspace-protection attacks at depth 1 and 3.
func plantAttacks() []attackDef {
	var out []attackDef
	for _, depth := range []string{"d1", "d3"} {
		rel := plantDepths[depth]
		for _, kind := range []string{"hook", "git-config", "config-rename", "new-repo", "bare-repo", "envrc",
			"vscode-tasks", "vscode-swap", "claude-settings", "mcp-json", "set-uid", "set-gid-dir", "pinned-policy"} {
			g := plantGoals[kind]
			dir := func(s *side) string { return filepath.Join(s.ws, rel) }
			a := attackDef{name: "plant-" + kind + "-" + depth, category: "files", cmd: "plant", wasi: "yes",
				goal: g.goal + " (depth " + depth[1:] + ")",
				args: func(s *side) []string {
					return kv("dir="+dir(s), "kind="+kind, "data=airlock-escape "+kind)
				},
			}
			switch kind {
			case "set-uid", "set-gid-dir":
				target := map[string]string{"set-uid": "tool", "set-gid-dir": "shared"}[kind]
				a.check = func(s *side) (bool, string) {
					fi, err := os.Stat(filepath.Join(dir(s), target))
					if err != nil {
						return false, err.Error()
					}
					return fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0, "host mode " + fi.Mode().String()
				}
			case "new-repo", "bare-repo":
				repo := filepath.Dir(g.evidence)
				a.check = func(s *side) (bool, string) {
					b, _ := os.ReadFile(filepath.Join(dir(s), g.evidence))
					complete := true
					for _, n := range []string{"HEAD", "objects", "refs"} {
						if _, err := os.Stat(filepath.Join(dir(s), repo, n)); err != nil {
							complete = false
						}
					}
					return complete && strings.Contains(string(b), "airlock-escape"), fmt.Sprintf("%s on the host: a repository %v, config %q", repo, complete, b)
				}
			default:
				a.check = func(s *side) (bool, string) {
					b, err := os.ReadFile(filepath.Join(dir(s), g.evidence))
					return err == nil && strings.Contains(string(b), "airlock-escape"), fmt.Sprintf("host %s: %q %v", g.evidence, b, err)
				}
			}
			if kind == "pinned-policy" {
				a.pinned = func(s *side) string { return filepath.Join(dir(s), "agent.yaml") }
				a.setup = func(s *side) error {
					return os.WriteFile(filepath.Join(dir(s), "agent.yaml"), []byte("version: 1\nnetwork: {mode: none}\n"), 0o644)
				}
			}
			out = append(out, a)
		}
	}
	return out
}

func noArgs(*side) []string { return nil }

func withCheck(a attackDef, c func(s *side) (bool, string)) attackDef {
	a.check = c
	return a
}

func apiReached(s *side) (bool, string) {
	for _, h := range s.hits {
		if strings.HasPrefix(h, "api: ") {
			return true, h
		}
	}
	return false, "no request reached the API"
}

// serviceReached is the check of attacks on a bait service.
func serviceReached(name string) func(s *side) (bool, string) {
	return func(s *side) (bool, string) {
		for _, h := range s.hits {
			if strings.HasPrefix(h, name+": ") {
				return true, h
			}
		}
		return false, "nothing reached " + name
	}
}
