package ocitest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Containerd describes a private containerd: its own root, state, sockets
// and opt dir under Dir, CNI configuration and plugins of its caller's, and
// two handlers on the runc shim: runc, and airlock (deploy/kubernetes's
// snippet with BinaryName = Runtime, the airlock-runc link), and with
// Gvisor a third, runsc, on gVisor's own shim.
type Containerd struct {
	Dir          string // everything containerd writes goes under it
	Socket       string // the gRPC socket (the ttrpc one is Socket+".ttrpc")
	SandboxImage string // the pause image (imported, never pulled)
	CNIConfDir   string
	CNIBinDir    string
	Runtime      string // the airlock-runc link
	Snippet      string // deploy/kubernetes/containerd-airlock.toml
	// StreamPort is the CRI streaming server's port on 127.0.0.1 (exec,
	// attach, port-forward); "0" picks a free one.
	StreamPort string
	// Gvisor, when set, adds the runsc handler: deploy/kubernetes's
	// containerd-gvisor.toml (this path) and runsc.toml beside it, with
	// the runsc and containerd-shim-runsc-v1 found on PATH and a private
	// runsc state root (see Gvisor).
	Gvisor string
}

// GvisorBinaries returns the runsc and containerd-shim-runsc-v1 on PATH
// (`make deps` links the pinned ones into /usr/local/bin), or why they
// cannot serve here: the shim gives its server oom_score_adj -999 and
// fails to start when root may not lower it (no CAP_SYS_RESOURCE, as on
// this project's machines).
func GvisorBinaries() (runsc, shim string, err error) {
	if runsc, err = exec.LookPath("runsc"); err != nil {
		return "", "", err
	}
	if shim, err = exec.LookPath("containerd-shim-runsc-v1"); err != nil {
		return "", "", err
	}
	if !effectiveCap(capSysResource) {
		return "", "", fmt.Errorf("containerd-shim-runsc-v1 sets its server's oom_score_adj to -999, which needs CAP_SYS_RESOURCE, and root here lacks it")
	}
	return runsc, shim, nil
}

const capSysResource = 24

// effectiveCap reports whether this process holds capability c.
func effectiveCap(c uint) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && m&(1<<c) != 0
		}
	}
	return false
}

// gvisorHandler is the runsc handler's configuration: the snippet with
// the shim found on PATH and its options file written under Dir.
func (c Containerd) gvisorHandler() (string, error) {
	runsc, shim, err := GvisorBinaries()
	if err != nil {
		return "", fmt.Errorf("containerd config: the gvisor handler: %w", err)
	}
	snippet, err := os.ReadFile(c.Gvisor)
	if err != nil {
		return "", fmt.Errorf("containerd config: %w", err)
	}
	opts, err := os.ReadFile(filepath.Join(filepath.Dir(c.Gvisor), "runsc.toml"))
	if err != nil {
		return "", fmt.Errorf("containerd config: %w", err)
	}
	o := strings.Replace(string(opts), `binary_name = "/usr/local/bin/runsc"`, "binary_name = "+strconv.Quote(runsc), 1)
	if o == string(opts) {
		return "", fmt.Errorf("containerd config: runsc.toml does not name /usr/local/bin/runsc")
	}
	o = "root = " + strconv.Quote(filepath.Join(c.Dir, "runsc-state")) + "\n" + o
	optsPath := filepath.Join(c.Dir, "runsc.toml")
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(optsPath, []byte(o), 0o644); err != nil {
		return "", err
	}
	h := string(snippet)
	for from, to := range map[string]string{`"/usr/local/bin/containerd-shim-runsc-v1"`: shim, `"/etc/containerd/runsc.toml"`: optsPath} {
		if strings.Count(h, from) != 1 {
			return "", fmt.Errorf("containerd config: %s does not name %s once", c.Gvisor, from)
		}
		h = strings.Replace(h, from, strconv.Quote(to), 1)
	}
	return h, nil
}

// Config returns the containerd configuration (version 2, containerd
// 1.6/1.7).
func (c Containerd) Config() (string, error) {
	port := c.StreamPort
	if port == "" {
		port = "0"
	}
	conf := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[debug]
  level = "info"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  # The host root here lacks CAP_SYS_RESOURCE: lowering is all it may do.
  restrict_oom_score_adj = true
  # Pods' network namespaces under this containerd's own state dir, not
  # the host's /run/netns, which another containerd (or anything else)
  # shares: two harnesses at once never see each other's.
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = %[9]q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[8]q
    conf_dir = %[7]q
`, filepath.Join(c.Dir, "root"), filepath.Join(c.Dir, "state"), c.Socket, c.Socket+".ttrpc",
		filepath.Join(c.Dir, "opt"), c.SandboxImage, c.CNIConfDir, c.CNIBinDir, port)
	// The airlock handler is the snippet deploy/kubernetes ships, with this
	// binary and a private state root.
	snippet, err := os.ReadFile(c.Snippet)
	if err != nil {
		return "", fmt.Errorf("containerd config: %w", err)
	}
	handler := strings.ReplaceAll(string(snippet), `"/usr/local/bin/airlock-runc"`, strconv.Quote(c.Runtime))
	if handler == string(snippet) {
		return "", fmt.Errorf("containerd config: %s does not name /usr/local/bin/airlock-runc", c.Snippet)
	}
	conf += handler + "    Root = " + strconv.Quote(filepath.Join(c.Dir, "airlock-state")) + "\n"
	if c.Gvisor != "" {
		h, err := c.gvisorHandler()
		if err != nil {
			return "", err
		}
		conf += h
	}
	return conf, nil
}
