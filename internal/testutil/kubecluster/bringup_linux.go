package kubecluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil/ocitest"
)

// bringUp starts the daemons, in parallel where their order does not
// matter (each component retries the apiserver until it answers), and
// waits until the cluster is usable, polling the API.
func (c *Cluster) bringUp(ctx context.Context) error {
	ctrd, err := c.startContainerd()
	if err != nil {
		return err
	}
	if err := c.poll(ctx, "containerd", []*proc{ctrd}, func() error { return run("ctr", "-a", c.ContainerdSocket, "version") }); err != nil {
		return err
	}
	imported := make(chan error, 1)
	go func() { imported <- c.importImages(ctx) }()
	procs, err := c.startControlPlane()
	if err != nil {
		return err
	}
	procs = append(procs, ctrd)
	if err := c.poll(ctx, "kube-apiserver", procs, func() error { return c.get("/readyz", nil) }); err != nil {
		return err
	}
	// kube-controller-manager gives the apiserver 10 s to be healthy and
	// exits when it is not: on a loaded machine its bootstrap hooks take
	// longer, so it starts only once the apiserver is ready.
	kcm, err := c.start("kube-controller-manager", filepath.Join(c.BinDir, "kube"), nil,
		append([]string{"kube-controller-manager"}, c.controllerManagerArgs()...)...)
	if err != nil {
		return err
	}
	procs = append(procs, kcm)
	if err := c.installObjects(ctx); err != nil {
		return err
	}
	asc, err := c.start("agent-sandbox-controller", filepath.Join(c.BinDir, "agent-sandbox-controller"),
		[]string{"KUBECONFIG=" + c.Kubeconfig},
		// No webhook (conversion is off in the CRDs), the extensions'
		// controllers (SandboxClaim, SandboxTemplate, SandboxWarmPool), no
		// listeners on the host's ports.
		"--enable-webhook=false", "--extensions=true", "--leader-elect=false",
		"--metrics-bind-address=0", "--health-probe-bind-address=0")
	if err != nil {
		return err
	}
	procs = append(procs, asc)
	for _, w := range []struct {
		what  string
		ready func() error
	}{
		{"node " + NodeName + " Ready", c.nodeReady},
		{"service account default/default", func() error { return c.get("/api/v1/namespaces/default/serviceaccounts/default", nil) }},
		{"configmap default/kube-root-ca.crt", func() error { return c.get("/api/v1/namespaces/default/configmaps/kube-root-ca.crt", nil) }},
	} {
		if err := c.poll(ctx, w.what, procs, w.ready); err != nil {
			return err
		}
	}
	select {
	case err := <-imported:
		if err != nil {
			return err
		}
	case <-ctx.Done():
		return fmt.Errorf("kubecluster: importing the test images: %w", ctx.Err())
	}
	return nil
}

func (c *Cluster) startContainerd() (*proc, error) {
	link := filepath.Join(c.Dir, "bin", "airlock-runc")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return nil, err
	}
	if err := os.Symlink(c.opts.Airlock, link); err != nil {
		return nil, err
	}
	op, err := ocitest.OperatorConfig(c.Dir)
	if err != nil {
		return nil, err
	}
	cni := filepath.Join(c.Dir, "cni")
	if err := os.MkdirAll(cni, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(cni, "10-airlock-kube.conflist"), []byte(c.cniConfig()), 0o644); err != nil {
		return nil, err
	}
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	ctrd := ocitest.Containerd{
		Dir: filepath.Join(c.Dir, "containerd"), Socket: c.ContainerdSocket, SandboxImage: ImageBusybox,
		CNIConfDir: cni, CNIBinDir: "/usr/lib/cni", Runtime: link,
		Snippet: filepath.Join(root, "deploy", "kubernetes", "containerd-airlock.toml"),
	}
	// The gvisor handler where gVisor's shim is installed (tests that
	// need it say so through Cluster.Gvisor).
	if _, _, err := ocitest.GvisorBinaries(); err == nil {
		ctrd.Gvisor = filepath.Join(root, "deploy", "kubernetes", "containerd-gvisor.toml")
		c.Gvisor = true
	} else {
		c.GvisorWhy = "no gvisor handler: " + err.Error() + " (make deps installs runsc and containerd-shim-runsc-v1)"
	}
	conf, err := ctrd.Config()
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(c.Dir, "containerd.toml")
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	return c.start("containerd", "containerd", []string{"AIRLOCK_OCI_CONFIG=" + op}, "--config", cfg)
}

// startControlPlane starts etcd, the apiserver, scheduler and kubelet at
// once (the last two wait for the apiserver on their own; the
// controller-manager does not: see startControllerManager).
func (c *Cluster) startControlPlane() ([]*proc, error) {
	var ports [3]string
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	c.Server = "https://127.0.0.1:" + ports[2]
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, []byte(c.pki.kubeconfig(c.Server)), 0o600); err != nil {
		return nil, err
	}
	kcfg := filepath.Join(c.Dir, "kubelet.yaml")
	if err := os.WriteFile(kcfg, []byte(c.kubeletConfig()), 0o644); err != nil {
		return nil, err
	}
	kube := filepath.Join(c.BinDir, "kube")
	var procs []*proc
	for _, s := range []struct {
		name, bin string
		args      []string
	}{
		{"etcd", "etcd", c.etcdArgs(ports[0], ports[1])},
		{"kube-apiserver", kube, append([]string{"kube-apiserver"}, c.apiserverArgs(ports[0], ports[2])...)},
		{"kube-scheduler", kube, append([]string{"kube-scheduler"}, c.schedulerArgs()...)},
		{"kubelet", kube, append([]string{"kubelet"}, c.kubeletArgs(kcfg)...)},
	} {
		p, err := c.start(s.name, s.bin, nil, s.args...)
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
	}
	return procs, nil
}

// installObjects installs the RuntimeClasses and agent-sandbox's CRDs and
// waits for the CRDs to be served.
func (c *Cluster) installObjects(ctx context.Context) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	rc, err := os.ReadFile(filepath.Join(root, "deploy", "kubernetes", "runtimeclass.yaml"))
	if err != nil {
		return err
	}
	crds, err := c.crds()
	if err != nil {
		return err
	}
	runc := "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: runc\nhandler: runc\n"
	objs := string(rc) + "\n---\n" + runc + "---\n" + crds
	if c.Gvisor {
		g, err := os.ReadFile(filepath.Join(root, "deploy", "kubernetes", "runtimeclass-gvisor.yaml"))
		if err != nil {
			return err
		}
		objs += "\n---\n" + string(g)
	}
	if err := c.Apply(ctx, objs); err != nil {
		return err
	}
	_, err = c.KubectlOut(ctx, "", "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
	return err
}

// poll calls ready until it succeeds, failing when ctx ends or one of
// procs exits.
func (c *Cluster) poll(ctx context.Context, what string, procs []*proc, ready func() error) error {
	for {
		err := ready()
		if err == nil {
			return nil
		}
		for _, p := range procs {
			if perr := p.exited(); perr != nil {
				return fmt.Errorf("kubecluster: waiting for %s: %w", what, perr)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubecluster: waiting for %s: %v (last: %v); logs in %s", what, ctx.Err(), err, c.LogDir)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// get GETs an API path, decoding JSON into v (when not nil).
func (c *Cluster) get(path string, v any) error {
	resp, err := c.http.Get(c.Server + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, b)
	}
	if v != nil {
		return json.Unmarshal(b, v)
	}
	return nil
}

func (c *Cluster) nodeReady() error {
	var node struct {
		Spec struct {
			Taints []struct{ Key string } `json:"taints"`
		} `json:"spec"`
		Status struct {
			Conditions []struct{ Type, Status string } `json:"conditions"`
		} `json:"status"`
	}
	if err := c.get("/api/v1/nodes/"+NodeName, &node); err != nil {
		return err
	}
	if len(node.Spec.Taints) > 0 {
		return fmt.Errorf("node tainted: %v", node.Spec.Taints)
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == "Ready" && cond.Status == "True" {
			return nil
		}
	}
	return fmt.Errorf("node not Ready: %v", node.Status.Conditions)
}

// API makes one request to the apiserver as the admin (body JSON, may be
// nil), decoding a 2xx answer's JSON into out (when not nil). A non-2xx
// answer is an error carrying the status and body.
func (c *Cluster) API(ctx context.Context, method, path string, body []byte, out any) error {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Server+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}
