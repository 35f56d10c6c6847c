package kubecluster

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/airlock-dev/airlock/internal/mountinfo"
)

// sysctls are the host settings the kubelet changes at start
// (setupKernelTunables: it sets them unless protectKernelDefaults) and the
// CNI bridge plugin may change (forwarding): recorded before the cluster
// starts and written back when it stops.
var sysctls = []string{
	"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes", "net.ipv4.ip_forward",
	"net.ipv4.conf.all.forwarding", "net.ipv6.conf.all.forwarding",
}

// hostDirs are host paths the kubelet, containerd's CNI and the apiserver
// write to whatever their flags say (or that they create on their own):
// what is new in them after the cluster stops is removed, and each that
// did not exist is removed.
var hostDirs = []string{
	"/var/lib/kubelet", "/var/log/pods", "/var/log/containers", "/var/lib/cni",
	"/var/run/kubernetes", "/etc/kubernetes",
}

// HostState is what a cluster may change on the host, as recorded before
// it starts: Diff of two says what was left changed.
type HostState struct {
	Sysctls  map[string]string   // name → value ("" when absent)
	Iptables map[string][]string // iptables-save / ip6tables-save, one entry per table, counters stripped
	Dirs     map[string][]string // host dir → its entries (nil: absent)
	Links    []string            // network interfaces whose names the cluster uses
	Cgroups  []string            // cgroup dirs the kubelet makes (cgroupRoot, kubepods)
	Mounts   []string            // mount points under the kubelet's and the cluster's dirs
}

// Snapshot records the host state a cluster may change.
func Snapshot() (*HostState, error) {
	h := &HostState{Sysctls: map[string]string{}, Iptables: map[string][]string{}, Dirs: map[string][]string{}}
	for _, s := range sysctls {
		b, err := os.ReadFile(sysctlPath(s))
		if err == nil {
			h.Sysctls[s] = strings.TrimSpace(string(b))
		}
	}
	for _, tool := range []string{"iptables-save", "ip6tables-save"} {
		out, err := exec.Command(tool).Output()
		if err != nil {
			return nil, fmt.Errorf("snapshot host: %s: %w", tool, err)
		}
		for table, lines := range parseSave(out) {
			h.Iptables[tool+" "+table] = lines
		}
	}
	for _, d := range hostDirs {
		h.Dirs[d] = listTree(d)
	}
	links, _ := filepath.Glob("/sys/class/net/*")
	for _, l := range links {
		if n := filepath.Base(l); n == bridgeName {
			h.Links = append(h.Links, n)
		}
	}
	h.Cgroups = ourCgroups()
	h.Mounts = ourMounts("")
	return h, nil
}

func sysctlPath(name string) string {
	return "/proc/sys/" + strings.ReplaceAll(name, ".", "/")
}

var counters = regexp.MustCompile(` \[\d+:\d+\]$`)

// parseSave splits iptables-save output into its tables, without the
// comments and packet counters (which change by themselves).
func parseSave(out []byte) map[string][]string {
	tables := map[string][]string{}
	var cur string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "#") || l == "" || l == "COMMIT":
		case strings.HasPrefix(l, "*"):
			cur = l[1:]
			tables[cur] = []string{}
		default:
			tables[cur] = append(tables[cur], counters.ReplaceAllString(l, ""))
		}
	}
	return tables
}

// listTree lists the paths under dir (nil when dir does not exist).
func listTree(dir string) []string {
	if _, err := os.Lstat(dir); err != nil {
		return nil
	}
	list := []string{}
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && p != dir {
			list = append(list, p)
		}
		return nil
	})
	return list
}

// ourCgroups are the cgroup dirs the cluster's kubelet makes: its kubepods
// trees at the top of each hierarchy.
func ourCgroups() []string {
	var out []string
	for _, pat := range []string{"/sys/fs/cgroup/*/kubepods*", "/sys/fs/cgroup/kubepods*"} {
		m, _ := filepath.Glob(pat)
		out = append(out, m...)
	}
	sort.Strings(out)
	return out
}

// ourMounts are the mount points under the cluster's dir (when given), the
// kubelet's default root and containerd's netns dir.
func ourMounts(clusterDir string) []string {
	mounts, err := mountinfo.Self()
	if err != nil {
		return nil
	}
	// containerd's pod network namespaces are under its state dir (see
	// ocitest: netns_mounts_under_state_dir), never the host's /run/netns,
	// which others share.
	prefixes := []string{"/var/lib/kubelet/"}
	if clusterDir != "" {
		prefixes = append(prefixes, clusterDir+"/")
	}
	var out []string
	for _, m := range mounts {
		for _, p := range prefixes {
			if strings.HasPrefix(m.Point+"/", p) {
				out = append(out, m.Point)
			}
		}
	}
	return out
}

// Diff lists how after differs from h (nothing: the host is as before).
func (h *HostState) Diff(after *HostState) []string {
	var d []string
	for k, v := range h.Sysctls {
		if after.Sysctls[k] != v {
			d = append(d, fmt.Sprintf("sysctl %s: %q before, %q after", k, v, after.Sysctls[k]))
		}
	}
	for k := range union(h.Iptables, after.Iptables) {
		for _, l := range lineDiff(h.Iptables[k], after.Iptables[k]) {
			d = append(d, k+": "+l)
		}
	}
	for k := range union(h.Dirs, after.Dirs) {
		if (h.Dirs[k] == nil) != (after.Dirs[k] == nil) {
			d = append(d, fmt.Sprintf("%s: existed before %v, after %v", k, h.Dirs[k] != nil, after.Dirs[k] != nil))
		}
		for _, l := range lineDiff(h.Dirs[k], after.Dirs[k]) {
			d = append(d, "file "+l)
		}
	}
	for _, l := range lineDiff(h.Links, after.Links) {
		d = append(d, "link "+l)
	}
	for _, l := range lineDiff(h.Cgroups, after.Cgroups) {
		d = append(d, "cgroup "+l)
	}
	for _, l := range lineDiff(h.Mounts, after.Mounts) {
		d = append(d, "mount "+l)
	}
	sort.Strings(d)
	return d
}

func union[V any](a, b map[string]V) map[string]bool {
	u := map[string]bool{}
	for k := range a {
		u[k] = true
	}
	for k := range b {
		u[k] = true
	}
	return u
}

// lineDiff lists the lines only in a ("- ") and only in b ("+ ").
func lineDiff(a, b []string) []string {
	in := func(s []string) map[string]int {
		m := map[string]int{}
		for _, x := range s {
			m[x]++
		}
		return m
	}
	ma, mb := in(a), in(b)
	var d []string
	for x, n := range ma {
		if mb[x] < n {
			d = append(d, "- "+x)
		}
	}
	for x, n := range mb {
		if ma[x] < n {
			d = append(d, "+ "+x)
		}
	}
	sort.Strings(d)
	return d
}

// restore undoes what the cluster changed since h: the sysctls are written
// back, the iptables chains and rules it added are removed, and so are the
// entries it added under the host dirs (and each dir it created). It
// returns what it could not undo.
func (h *HostState) restore() []error {
	var errs []error
	for k, v := range h.Sysctls {
		cur, err := os.ReadFile(sysctlPath(k))
		if err == nil && strings.TrimSpace(string(cur)) != v {
			if err := os.WriteFile(sysctlPath(k), []byte(v), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("restore sysctl %s: %w", k, err))
			}
		}
	}
	errs = append(errs, h.restoreIptables()...)
	for _, d := range hostDirs {
		before := map[string]bool{}
		for _, p := range h.Dirs[d] {
			before[p] = true
		}
		if h.Dirs[d] == nil {
			if err := os.RemoveAll(d); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		// Deepest first, so a new dir is empty when its turn comes.
		now := listTree(d)
		sort.Sort(sort.Reverse(sort.StringSlice(now)))
		for _, p := range now {
			if !before[p] {
				if err := os.RemoveAll(p); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errs
}
