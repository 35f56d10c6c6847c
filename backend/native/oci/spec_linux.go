package oci

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/backend/native"
	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/policy"
)

// maxConfig bounds config.json (and an exec's process.json).
const maxConfig = 4 << 20

// readJSON decodes one bounded JSON file the caller named.
func readJSON(file string, v any) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfig+1))
	if err != nil {
		return err
	}
	if len(data) > maxConfig {
		return fmt.Errorf("%s: larger than %d bytes", file, maxConfig)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %v", file, err)
	}
	return nil
}

// Paths the container always gets masked or read-only, whatever
// config.json says (a privileged container included).
var (
	floorMasked = []string{
		"/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
		"/proc/sched_debug", "/proc/kallsyms", "/proc/kmsg", "/proc/scsi", "/proc/acpi",
		"/sys/firmware", "/sys/devices/virtual/powercap", "/sys/kernel/debug", "/sys/kernel/security",
	}
	floorReadOnly = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
	// defaultDevices are the only device nodes a container gets.
	defaultDevices = []string{"null", "zero", "full", "random", "urandom", "tty"}
)

// hostDenied are host paths no bind mount may bring into a container:
// the host's root and kernel interfaces, and the sockets of the
// container managers (each is root on the host).
var hostDenied = []string{"/", "/proc", "/sys", "/dev", "/boot", "/run/containerd/containerd.sock",
	"/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock.ttrpc"}

// decision is what the Airlock policy adds to config.json.
type decision struct {
	name    string
	pol     *policy.Policy
	ro      []string // container paths made read-only (Landlock)
	deny    []string // container paths masked
	tmpfs   []string
	netNone bool
}

// decide maps the chosen Airlock policy onto runtime mode: filesystem
// paths are the container's; network none gives the container a private
// network namespace; an allowlist, secrets or caches need the host-side
// egress proxy and are refused (fail closed) rather than ignored.
func decide(op *OperatorConfig, ann map[string]string) (*decision, error) {
	pol, name, err := op.choosePolicy(ann)
	if err != nil {
		return nil, err
	}
	d := &decision{name: name, pol: pol}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: "+format+": %w", append(append([]any{name}, args...), errdefs.ErrUnavailable)...)
	}
	switch pol.Network.Mode {
	case "", policy.NetworkNone:
		if len(pol.Network.Allow) > 0 {
			return nil, bad("network allow entries need Airlock's egress proxy, which runtime mode does not run; use network mode open (the pod's network and its NetworkPolicies apply) or none")
		}
		d.netNone = true
	case policy.NetworkOpen:
	case policy.NetworkAllowlist:
		return nil, bad("network mode allowlist needs Airlock's egress proxy, which runtime mode does not run; use network mode open (the pod's network and its NetworkPolicies apply) or none")
	default:
		return nil, bad("unknown network mode %q", pol.Network.Mode)
	}
	if len(pol.Secrets) > 0 {
		return nil, bad("secrets are injected by Airlock's egress proxy, which runtime mode does not run")
	}
	if len(pol.Caches) > 0 {
		return nil, bad("caches are not available in runtime mode (use a volume)")
	}
	if b := pol.Backend; b != "" && b != "native" && b != "auto" {
		return nil, bad("backend %q: the OCI runtime runs containers on the native backend", b)
	}
	containerPaths := func(field string, in []string) ([]string, error) {
		var out []string
		for _, p := range in {
			if strings.HasPrefix(p, "~") {
				continue // a home on the host: no meaning in a container
			}
			if !path.IsAbs(p) {
				return nil, fmt.Errorf("%s: filesystem.%s: %q is not absolute: %w", name, field, p, errdefs.ErrInvalid)
			}
			out = append(out, path.Clean(p))
		}
		return out, nil
	}
	if d.ro, err = containerPaths("read_only", pol.Filesystem.ReadOnly); err != nil {
		return nil, err
	}
	if d.deny, err = containerPaths("deny", pol.Filesystem.Deny); err != nil {
		return nil, err
	}
	if d.tmpfs, err = containerPaths("tmpfs", pol.Filesystem.Tmpfs); err != nil {
		return nil, err
	}
	return d, nil
}

// buildPlan turns a bundle's config.json into the init's plan, clamped by
// the operator's ceiling and the policy. It touches nothing on the host.
func buildPlan(id, bundle string, spec *specs.Spec, op *OperatorConfig, d *decision, feats native.Features, cg *cgroupPaths) (*initPlan, error) {
	inv := func(format string, args ...any) error {
		return fmt.Errorf("config.json: "+format+": %w", append(args, errdefs.ErrInvalid)...)
	}
	if spec.Root == nil || spec.Root.Path == "" {
		return nil, inv("root.path is missing")
	}
	if spec.Process == nil {
		return nil, inv("process is missing")
	}
	if spec.Linux == nil {
		return nil, inv("linux is missing")
	}
	root := spec.Root.Path
	if !filepath.IsAbs(root) {
		root = filepath.Join(bundle, root)
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return nil, inv("root.path %s is not a directory", root)
	}
	p := &initPlan{ID: id, Rootfs: root, RootRO: spec.Root.Readonly, Propagation: unix.MS_SLAVE | unix.MS_REC,
		Hostname: spec.Hostname, Domainname: spec.Domainname}
	if rp := spec.Linux.RootfsPropagation; rp != "" {
		f, ok := propagationFlags[rp]
		if !ok {
			return nil, inv("linux.rootfsPropagation %q unknown", rp)
		}
		p.Propagation = f
	}
	for k, v := range spec.Linux.Sysctl {
		if !namespacedSysctl(k) {
			return nil, fmt.Errorf("config.json: linux.sysctl %q is not namespaced (it would change the host): %w", k, errdefs.ErrPermission)
		}
		p.Sysctl = append(p.Sysctl, [2]string{k, v})
	}
	slices.SortFunc(p.Sysctl, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	if err := checkNamespaces(spec.Linux.Namespaces, d, p); err != nil {
		return nil, err
	}
	for _, dev := range spec.Linux.Devices {
		if !slices.Contains(defaultDevices, strings.TrimPrefix(dev.Path, "/dev/")) {
			return nil, fmt.Errorf("config.json: device %s: only %s are given to containers: %w", dev.Path, strings.Join(defaultDevices, ", "), errdefs.ErrPermission)
		}
	}
	p.Devices = defaultDevices
	p.Masked = union(floorMasked, spec.Linux.MaskedPaths, d.deny)
	p.ReadOnly = union(floorReadOnly, spec.Linux.ReadonlyPaths)
	var mediated []string
	for i, m := range spec.Mounts {
		st, err := mountFor(bundle, m, cg)
		if err != nil {
			return nil, fmt.Errorf("config.json: mounts[%d] (%s): %w", i, m.Destination, err)
		}
		if st.Bind && st.Flags&unix.MS_RDONLY == 0 && st.SrcIsDir {
			mediated = append(mediated, st.Dst)
		}
		p.Mounts = append(p.Mounts, st)
	}
	for _, t := range d.tmpfs {
		size := int64(d.pol.Limits.DiskBytes)
		data := "mode=1777"
		if size > 0 {
			data += fmt.Sprintf(",size=%d", size)
		}
		p.Mounts = append(p.Mounts, mountStep{Dst: t, Type: "tmpfs", Flags: unix.MS_NOSUID | unix.MS_NODEV, Data: data})
	}
	proc, err := processPlan(spec.Process, op, d, false)
	if err != nil {
		return nil, err
	}
	p.Proc = *proc
	c, err := confine(spec.Linux.Seccomp, op, d, feats, mediated)
	if err != nil {
		return nil, err
	}
	p.Confine = *c
	return p, nil
}

var propagationFlags = map[string]uintptr{
	"private": unix.MS_PRIVATE, "rprivate": unix.MS_PRIVATE | unix.MS_REC,
	"slave": unix.MS_SLAVE, "rslave": unix.MS_SLAVE | unix.MS_REC,
	"shared": unix.MS_SHARED, "rshared": unix.MS_SHARED | unix.MS_REC,
	"unbindable": unix.MS_UNBINDABLE, "runbindable": unix.MS_UNBINDABLE | unix.MS_REC,
}

// namespacedSysctl reports whether a sysctl belongs to a namespace the
// container owns (IPC, the network), not to the host.
func namespacedSysctl(k string) bool {
	switch k {
	case "kernel.msgmax", "kernel.msgmnb", "kernel.msgmni", "kernel.sem", "kernel.shmall",
		"kernel.shmmax", "kernel.shmmni", "kernel.shm_rmid_forced":
		return true
	}
	return strings.HasPrefix(k, "fs.mqueue.") || strings.HasPrefix(k, "net.")
}

// checkNamespaces accepts what Airlock can contain: a new mount
// namespace, new or joined pid, ipc, uts, net and cgroup namespaces; no
// user namespace (phase 1) and none of the host's pid, ipc or network.
func checkNamespaces(ns []specs.LinuxNamespace, d *decision, p *initPlan) error {
	have := map[specs.LinuxNamespaceType]specs.LinuxNamespace{}
	for _, n := range ns {
		if _, dup := have[n.Type]; dup {
			return fmt.Errorf("config.json: namespace %s listed twice: %w", n.Type, errdefs.ErrInvalid)
		}
		have[n.Type] = n
	}
	for _, t := range []specs.LinuxNamespaceType{specs.MountNamespace, specs.PIDNamespace, specs.IPCNamespace} {
		if _, ok := have[t]; !ok {
			return fmt.Errorf("config.json: the host's %s namespace: Airlock does not run containers in it: %w", t, errdefs.ErrPermission)
		}
	}
	if n := have[specs.MountNamespace]; n.Path != "" {
		return fmt.Errorf("config.json: joining a mount namespace (%s) is not supported: %w", n.Path, errdefs.ErrNotSupported)
	}
	if n, ok := have[specs.UserNamespace]; ok {
		return fmt.Errorf("config.json: user namespaces (%q) are not supported by the airlock runtime yet: %w", n.Path, errdefs.ErrNotSupported)
	}
	if _, ok := have[specs.TimeNamespace]; ok {
		return fmt.Errorf("config.json: time namespaces are not supported: %w", errdefs.ErrNotSupported)
	}
	net, ok := have[specs.NetworkNamespace]
	if !ok && !d.netNone {
		// With network none the init moves into a namespace of its own.
		return fmt.Errorf("config.json: the host's network namespace: Airlock runs a container in it only when its policy says network none (then it gets an empty one): %w", errdefs.ErrPermission)
	}
	p.NewNet = ok && net.Path == ""
	p.PrivateNet = d.netNone
	return nil
}

// mountFor resolves one config.json mount.
func mountFor(bundle string, m specs.Mount, cg *cgroupPaths) (mountStep, error) {
	if !path.IsAbs(m.Destination) {
		return mountStep{}, fmt.Errorf("destination must be absolute: %w", errdefs.ErrInvalid)
	}
	st := mountStep{Dst: path.Clean(m.Destination), Type: m.Type, Src: m.Source}
	var data []string
	for _, o := range m.Options {
		if f, ok := mountFlags[o]; ok {
			if f.clear {
				st.Flags &^= f.flag
			} else {
				st.Flags |= f.flag
			}
			continue
		}
		if f, ok := propagationFlags[o]; ok {
			st.Prop = f
			continue
		}
		switch o {
		case "bind":
			st.Bind = true
		case "rbind":
			st.Bind = true
			st.Flags |= unix.MS_REC
		case "tmpcopyup", "idmap", "ridmap":
			if o != "tmpcopyup" {
				return mountStep{}, fmt.Errorf("option %s (id-mapped mounts) is not supported: %w", o, errdefs.ErrNotSupported)
			}
		default:
			data = append(data, o)
		}
	}
	if m.Type == "bind" {
		st.Bind = true
	}
	st.Data = strings.Join(data, ",")
	if st.Bind {
		src := m.Source
		if !filepath.IsAbs(src) {
			src = filepath.Join(bundle, src)
		}
		src = filepath.Clean(src)
		real, err := filepath.EvalSymlinks(src)
		if err != nil {
			return mountStep{}, fmt.Errorf("bind source %s: %v: %w", src, err, errdefs.ErrInvalid)
		}
		for _, h := range hostDenied {
			if real == h || (h != "/" && under(real, h)) {
				if strings.HasPrefix(real, "/dev/") && slices.Contains(defaultDevices, strings.TrimPrefix(real, "/dev/")) {
					continue
				}
				return mountStep{}, fmt.Errorf("bind source %s: host path %s is never given to a container: %w", src, h, errdefs.ErrPermission)
			}
		}
		fi, err := os.Stat(real)
		if err != nil {
			return mountStep{}, fmt.Errorf("bind source %s: %v: %w", src, err, errdefs.ErrInvalid)
		}
		if fi.Mode()&(os.ModeDevice|os.ModeCharDevice) != 0 && !slices.Contains(defaultDevices, filepath.Base(real)) {
			return mountStep{}, fmt.Errorf("bind source %s is a device: %w", src, errdefs.ErrPermission)
		}
		st.Src, st.SrcIsDir = real, fi.IsDir()
		// Bind mounts from the host never carry set-id bits or devices in.
		st.Flags |= unix.MS_NOSUID | unix.MS_NODEV
		return st, nil
	}
	switch m.Type {
	case "proc", "tmpfs", "devpts", "mqueue":
	case "sysfs":
		st.Flags |= unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	case "cgroup", "cgroup2":
		st.Cgroup = true
		st.CgroupDirs = cg.forMount()
	default:
		return mountStep{}, fmt.Errorf("filesystem type %q is not supported: %w", m.Type, errdefs.ErrNotSupported)
	}
	st.Flags |= unix.MS_NOSUID
	return st, nil
}

type mountFlag struct {
	flag  uintptr
	clear bool
}

var mountFlags = map[string]mountFlag{
	"ro": {unix.MS_RDONLY, false}, "rw": {unix.MS_RDONLY, true},
	"nosuid": {unix.MS_NOSUID, false}, "suid": {unix.MS_NOSUID, true},
	"nodev": {unix.MS_NODEV, false}, "dev": {unix.MS_NODEV, true},
	"noexec": {unix.MS_NOEXEC, false}, "exec": {unix.MS_NOEXEC, true},
	"sync": {unix.MS_SYNCHRONOUS, false}, "async": {unix.MS_SYNCHRONOUS, true},
	"dirsync": {unix.MS_DIRSYNC, false}, "mand": {unix.MS_MANDLOCK, false}, "nomand": {unix.MS_MANDLOCK, true},
	"noatime": {unix.MS_NOATIME, false}, "atime": {unix.MS_NOATIME, true},
	"nodiratime": {unix.MS_NODIRATIME, false}, "diratime": {unix.MS_NODIRATIME, true},
	"relatime": {unix.MS_RELATIME, false}, "norelatime": {unix.MS_RELATIME, true},
	"strictatime": {unix.MS_STRICTATIME, false}, "remount": {unix.MS_REMOUNT, false},
}

// processPlan clamps a config.json (or exec) process: capabilities within
// the ceiling, the policy's uid/gid and environment on top.
func processPlan(sp *specs.Process, op *OperatorConfig, d *decision, exec bool) (*procPlan, error) {
	if len(sp.Args) == 0 {
		return nil, fmt.Errorf("process.args is empty: %w", errdefs.ErrInvalid)
	}
	if !path.IsAbs(sp.Cwd) {
		return nil, fmt.Errorf("process.cwd %q must be absolute: %w", sp.Cwd, errdefs.ErrInvalid)
	}
	pp := &procPlan{Args: sp.Args, Env: slices.Clone(sp.Env), Cwd: sp.Cwd, UID: sp.User.UID, GID: sp.User.GID,
		Groups: sp.User.AdditionalGids, Umask: sp.User.Umask, Terminal: sp.Terminal, OOMScore: sp.OOMScoreAdj}
	if d.pol.Process.UID != nil {
		pp.UID = uint32(*d.pol.Process.UID)
	}
	if d.pol.Process.GID != nil {
		pp.GID = uint32(*d.pol.Process.GID)
	}
	keys := make([]string, 0, len(d.pol.Process.Env))
	for k := range d.pol.Process.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		pp.Env = slices.DeleteFunc(pp.Env, func(kv string) bool { return strings.HasPrefix(kv, k+"=") })
		pp.Env = append(pp.Env, k+"="+d.pol.Process.Env[k])
	}
	if c := sp.Capabilities; c != nil {
		sets := []struct {
			in  []string
			out *[]int
		}{{c.Bounding, &pp.Caps.Bounding}, {c.Effective, &pp.Caps.Effective}, {c.Permitted, &pp.Caps.Permitted},
			{c.Inheritable, &pp.Caps.Inheritable}, {c.Ambient, &pp.Caps.Ambient}}
		for _, s := range sets {
			kept, _, err := clampCaps(s.in, op.caps)
			if err != nil {
				return nil, fmt.Errorf("process.capabilities: %v: %w", err, errdefs.ErrInvalid)
			}
			*s.out = kept
		}
	}
	for _, r := range sp.Rlimits {
		res, ok := rlimitNames[r.Type]
		if !ok {
			return nil, fmt.Errorf("process.rlimits: unknown %q: %w", r.Type, errdefs.ErrInvalid)
		}
		pp.Rlimits = append(pp.Rlimits, rlimit{Resource: res, Cur: r.Soft, Max: r.Hard})
	}
	if n := d.pol.Limits.OpenFiles; n > 0 {
		pp.Rlimits = capRlimit(pp.Rlimits, unix.RLIMIT_NOFILE, uint64(n))
	}
	pp.Rlimits = capRlimit(pp.Rlimits, unix.RLIMIT_CORE, 0)
	_ = exec
	return pp, nil
}

// capRlimit makes resource at most n (adding the limit when absent).
func capRlimit(rs []rlimit, res int, n uint64) []rlimit {
	for i := range rs {
		if rs[i].Resource == res {
			rs[i].Cur, rs[i].Max = min(rs[i].Cur, n), min(rs[i].Max, n)
			return rs
		}
	}
	return append(rs, rlimit{Resource: res, Cur: n, Max: n})
}

var rlimitNames = map[string]int{
	"RLIMIT_AS": unix.RLIMIT_AS, "RLIMIT_CORE": unix.RLIMIT_CORE, "RLIMIT_CPU": unix.RLIMIT_CPU,
	"RLIMIT_DATA": unix.RLIMIT_DATA, "RLIMIT_FSIZE": unix.RLIMIT_FSIZE, "RLIMIT_LOCKS": unix.RLIMIT_LOCKS,
	"RLIMIT_MEMLOCK": unix.RLIMIT_MEMLOCK, "RLIMIT_MSGQUEUE": unix.RLIMIT_MSGQUEUE, "RLIMIT_NICE": unix.RLIMIT_NICE,
	"RLIMIT_NOFILE": unix.RLIMIT_NOFILE, "RLIMIT_NPROC": unix.RLIMIT_NPROC, "RLIMIT_RSS": unix.RLIMIT_RSS,
	"RLIMIT_RTPRIO": unix.RLIMIT_RTPRIO, "RLIMIT_RTTIME": unix.RLIMIT_RTTIME, "RLIMIT_SIGPENDING": unix.RLIMIT_SIGPENDING,
	"RLIMIT_STACK": unix.RLIMIT_STACK,
}

// confine decides what every process of the container gets: Landlock (or
// a degraded, audited start when the policy allows it), the seccomp floor
// (routing writes on host-backed writable mounts to the mediator when the
// policy protects config) and the container's own filter on top.
func confine(sc *specs.LinuxSeccomp, op *OperatorConfig, d *decision, feats native.Features, mediated []string) (*confinement, error) {
	c := &confinement{UseLandlock: feats.LandlockABI > 0, Ceiling: op.CapabilityCeiling(), ReadOnlyPaths: d.ro}
	unavailable := func(what string) error {
		return fmt.Errorf("%s: %s: %w", d.name, what, errdefs.ErrUnavailable)
	}
	if !c.UseLandlock && !d.pol.AllowDegraded {
		return nil, unavailable("landlock not supported by this kernel")
	}
	if !feats.Seccomp || !feats.SeccompArch {
		return nil, unavailable("seccomp filter not available on this host")
	}
	protect := d.pol.Filesystem.ProtectConfig == nil || *d.pol.Filesystem.ProtectConfig
	mediate := len(mediated) > 0 && protect
	if mediate && !(feats.SeccompUserNotif && feats.SeccompAddFD && c.UseLandlock) {
		if !d.pol.AllowDegraded {
			return nil, unavailable("write mediation for host-backed writable mounts (" + strings.Join(mediated, ", ") + ") needs seccomp user notification with ADDFD (Linux 5.14+): without it protected config and set-id bits cannot be enforced there")
		}
		mediate = false
	}
	if mediate {
		c.MediatedPaths = mediated
		c.Listen = true
	}
	var err error
	if c.Floor, err = native.SeccompFloor(mediate, mediate); err != nil {
		return nil, unavailable(err.Error())
	}
	if c.Filter, err = compileSeccomp(sc); err != nil {
		return nil, fmt.Errorf("config.json: linux.seccomp: %v: %w", err, errdefs.ErrInvalid)
	}
	return c, nil
}

// union returns the clean, sorted, de-duplicated paths of lists.
func union(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		for _, p := range l {
			if p == "" {
				continue
			}
			p = path.Clean(p)
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}
