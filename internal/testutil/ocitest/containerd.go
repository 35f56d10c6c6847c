package ocitest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Containerd describes a private containerd: its own root, state, sockets
// and opt dir under Dir, CNI configuration and plugins of its caller's, and
// two handlers on the runc shim: runc, and airlock (deploy/kubernetes's
// snippet with BinaryName = Runtime, the airlock-runc link).
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
	return conf + handler + "    Root = " + strconv.Quote(filepath.Join(c.Dir, "airlock-state")) + "\n", nil
}
