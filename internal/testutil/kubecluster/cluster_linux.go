package kubecluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil/ocitest"
)

// Images are the names the test images are imported under (containerd's
// k8s.io namespace): pods use them with imagePullPolicy: Never.
const (
	// ImagePython is Debian bookworm minbase with python3
	// (/var/cache/airlock-test-images/debian-bookworm-python.tar).
	ImagePython = "airlock.test/debian-bookworm-python:1"
	// ImageMinbase is Debian bookworm minbase.
	ImageMinbase = "airlock.test/debian-bookworm-minbase:1"
	// ImageBusybox is Debian's static busybox, also the pause image.
	ImageBusybox = "airlock.test/busybox:1"
)

// Options says what to run. Zero values find everything where make deps
// puts it.
type Options struct {
	// Airlock is the airlock binary (the airlock handler runs it as
	// airlock-runc). Required.
	Airlock string
	// BinDir holds kube, its component links, agent-sandbox-controller
	// and crds/ (what scripts/kube.sh prints); "" runs scripts/kube.sh.
	BinDir string
	// Images is the Debian test images' dir ($AIRLOCK_TEST_IMAGES,
	// /var/cache/airlock-test-images).
	Images string
	// LogDir keeps the components' logs after Stop; "" puts them in the
	// cluster's dir, removed with it.
	LogDir string
	// Timeout bounds the start once the machine's cluster lock is held
	// (default 3 minutes); waiting for the lock is bounded by Start's ctx.
	Timeout time.Duration
}

// Cluster is a running one-node cluster. Its methods are safe for
// concurrent use; Stop is idempotent.
type Cluster struct {
	Dir              string // the cluster's own dir (removed by Stop)
	BinDir           string // kube, kubectl, ... (scripts/kube.sh's)
	Kubeconfig       string // the admin's kubeconfig
	Server           string // https://127.0.0.1:PORT
	ContainerdSocket string
	LogDir           string
	// Gvisor: containerd has the runsc handler (gVisor's shim and runsc on
	// PATH: make deps) and the gvisor RuntimeClass exists; else GvisorWhy.
	Gvisor    bool
	GvisorWhy string
	// Before is the host as it was before the cluster started; Stop
	// restores it and fails if anything differs.
	Before *HostState

	opts  Options
	pki   *pki
	http  *http.Client
	lock  *os.File
	guard *exec.Cmd
	gpipe *os.File

	mu      sync.Mutex
	procs   []*proc
	state   guardState
	stopped bool
	stopErr error
}

// Start brings up a cluster: it waits for the machine's cluster lock (one
// cluster per machine: the kubelet's port and host state are global),
// records the host state, and starts containerd, etcd, the apiserver,
// controller-manager, scheduler, kubelet and agent-sandbox's controller.
// It returns when the node is Ready, the RuntimeClasses airlock and runc
// and agent-sandbox's CRDs are installed, the test images are imported and
// pods can be created. On error nothing is left behind: the Cluster
// returned beside the error, when not nil, is already stopped (its Before
// says how the host was).
func Start(ctx context.Context, o Options) (c *Cluster, err error) {
	if o.Airlock == "" {
		return nil, errors.New("kubecluster: Options.Airlock (the airlock binary) is required")
	}
	if st, err := os.Stat(o.Airlock); err != nil || !st.Mode().IsRegular() || st.Mode()&0o111 == 0 || !filepath.IsAbs(o.Airlock) {
		return nil, fmt.Errorf("kubecluster: Options.Airlock %q must be the absolute path of an executable airlock binary (stat: %v)", o.Airlock, err)
	}
	if o.Timeout == 0 {
		o.Timeout = 3 * time.Minute
	}
	// Building the binaries (once per machine) and waiting for another
	// cluster to stop are bounded by ctx only, not by the start's timeout.
	if o.BinDir == "" {
		if o.BinDir, err = KubeBinaries(ctx); err != nil {
			return nil, err
		}
	}
	if o.Images == "" {
		o.Images = os.Getenv("AIRLOCK_TEST_IMAGES")
		if o.Images == "" {
			o.Images = "/var/cache/airlock-test-images"
		}
	}
	c = &Cluster{opts: o, BinDir: o.BinDir}
	if c.lock, err = lockMachine(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	defer func() {
		if err != nil {
			if serr := c.Stop(); serr != nil {
				err = fmt.Errorf("%w (and stopping: %v)", err, serr)
			}
		}
	}()
	if err = c.prepare(); err != nil {
		return c, err
	}
	return c, c.bringUp(ctx)
}

// lockMachine takes the machine's cluster lock, waiting for it until ctx
// ends.
func lockMachine(ctx context.Context) (*os.File, error) {
	f, err := os.OpenFile("/run/airlock-kubecluster.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("kubecluster: lock: %w", err)
	}
	for {
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			return f, nil
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("kubecluster: another cluster holds /run/airlock-kubecluster.lock: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// prepare records the host, makes the dir, starts the guard, writes the
// credentials and configs and makes the bridge.
func (c *Cluster) prepare() (err error) {
	if c.Before, err = Snapshot(); err != nil {
		return err
	}
	// Short: unix socket paths are limited to 108 bytes.
	if c.Dir, err = os.MkdirTemp("", "al-kube-"); err != nil {
		return err
	}
	c.state = guardState{Dir: c.Dir, Before: c.Before}
	c.LogDir = c.opts.LogDir
	if c.LogDir == "" {
		c.LogDir = filepath.Join(c.Dir, "logs")
	}
	if err = os.MkdirAll(c.LogDir, 0o755); err != nil {
		return err
	}
	c.ContainerdSocket = filepath.Join(c.Dir, "c.sock")
	c.state.Socket = c.ContainerdSocket
	if err = c.startGuard(); err != nil {
		return err
	}
	if c.pki, err = newPKI(filepath.Join(c.Dir, "pki")); err != nil {
		return err
	}
	tc, err := c.pki.tlsConfig()
	if err != nil {
		return err
	}
	c.http = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	c.state.Bridge = true
	if err = c.saveState(); err != nil {
		return err
	}
	for _, a := range [][]string{
		{"link", "add", bridgeName, "type", "bridge"},
		{"addr", "add", nodeIP + "/24", "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
	} {
		if err = run("ip", a...); err != nil {
			return err
		}
	}
	return nil
}

// Kubectl returns a kubectl command (the multi-call binary's) on the
// cluster.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir, "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	return cmd
}

// KubectlOut runs kubectl with stdin (may be "") and returns its output;
// the error carries stderr.
func (c *Cluster) KubectlOut(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := c.Kubectl(ctx, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return string(out), nil
}

// Apply applies manifests (YAML, several separated by ---).
func (c *Cluster) Apply(ctx context.Context, manifests string) error {
	_, err := c.KubectlOut(ctx, manifests, "apply", "-f", "-")
	return err
}

// importImages imports the test images into containerd's k8s.io
// namespace (what the kubelet sees).
func (c *Cluster) importImages(ctx context.Context) error {
	tmp := filepath.Join(c.Dir, "images")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	bb := filepath.Join(tmp, "busybox-layer.tar")
	if err := ocitest.BusyboxLayer("/bin/busybox", bb); err != nil {
		return err
	}
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	images := []ocitest.Image{
		{Name: ImageBusybox, Layer: bb, Env: []string{"PATH=/bin"}, Cmd: []string{"sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"}},
		{Name: ImageMinbase, Layer: filepath.Join(c.opts.Images, "debian-bookworm-minbase.tar"), Env: env, Cmd: []string{"sleep", "infinity"}},
		{Name: ImagePython, Layer: filepath.Join(c.opts.Images, "debian-bookworm-python.tar"), Env: env, Cmd: []string{"sleep", "infinity"}},
	}
	for i, im := range images {
		out := filepath.Join(tmp, fmt.Sprintf("image%d.tar", i))
		if err := im.Write(out); err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, "ctr", "-a", c.ContainerdSocket, "-n", "k8s.io", "images", "import", out)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("import %s: %v: %s", im.Name, err, b)
		}
		_ = os.Remove(out)
	}
	return nil
}

// Lock takes the machine's cluster lock (waiting until ctx ends) and
// returns its release: a test comparing the host with a cluster's Before
// holds it while it snapshots, so that no other cluster runs meanwhile.
func Lock(ctx context.Context) (release func(), err error) {
	f, err := lockMachine(ctx)
	if err != nil {
		return nil, err
	}
	return func() { f.Close() }, nil
}
