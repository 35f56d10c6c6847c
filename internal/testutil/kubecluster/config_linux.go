package kubecluster

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

const (
	// bridgeName is the pods' bridge; its address is the node's IP (the
	// kubelet refuses a loopback one) and the pods' subnet's gateway.
	bridgeName = "alkube0"
	nodeIP     = NodeIP
	podSubnet  = "10.250.77.0/24"
	serviceIP  = "10.96.0.1"
	// NodeIP is the node's address (on its pods' bridge): the kubelet
	// listens on it, pods reach it.
	NodeIP = "10.250.77.1"
	// NodeName is the cluster's one node.
	NodeName = "airlock-node"
)

// freePort returns a TCP port on 127.0.0.1 nothing listens on now.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

// cniConfig is the pods' network: Debian's bridge plugin on the node's
// bridge, addresses from host-local (its state under the cluster dir), no
// masquerading, no forwarding, no default route: pods reach each other and
// the node, nothing beyond.
func (c *Cluster) cniConfig() string {
	return fmt.Sprintf(`{"cniVersion":"1.0.0","name":"airlock-kube","plugins":[{"type":"bridge","bridge":%q,
"isGateway":false,"ipMasq":false,"hairpinMode":false,"ipam":{"type":"host-local","dataDir":%q,
"ranges":[[{"subnet":%q,"rangeStart":"10.250.77.10"}]]}}]}`, bridgeName, filepath.Join(c.Dir, "cni-ipam"), podSubnet)
}

func (c *Cluster) etcdArgs(client, peer string) []string {
	return []string{"--name", "airlock", "--data-dir", filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls", "http://127.0.0.1:" + client, "--advertise-client-urls", "http://127.0.0.1:" + client,
		"--listen-peer-urls", "http://127.0.0.1:" + peer, "--initial-advertise-peer-urls", "http://127.0.0.1:" + peer,
		"--initial-cluster", "airlock=http://127.0.0.1:" + peer, "--log-level", "warn"}
}

func (c *Cluster) apiserverArgs(etcdPort, port string) []string {
	p := c.pki
	return []string{
		"--etcd-servers", "http://127.0.0.1:" + etcdPort,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", port,
		// On loopback there are no endpoints to reconcile for the
		// kubernetes Service (the reconciler refuses a loopback address).
		"--endpoint-reconciler-type", "none",
		"--cert-dir", filepath.Join(c.Dir, "apiserver-certs"),
		"--tls-cert-file", p.serverCert, "--tls-private-key-file", p.serverKey,
		"--client-ca-file", p.caCert,
		"--service-account-issuer", "https://kubernetes.default.svc", "--service-account-key-file", p.saKey,
		"--service-account-signing-key-file", p.saKey, "--api-audiences", "https://kubernetes.default.svc",
		"--service-cluster-ip-range", "10.96.0.0/24",
		"--authorization-mode", "RBAC",
		"--kubelet-preferred-address-types", "InternalIP",
		"--kubelet-client-certificate", p.clientCert, "--kubelet-client-key", p.clientKey,
		"--allow-privileged=true", "--profiling=false", "--v=1",
	}
}

func (c *Cluster) controllerManagerArgs() []string {
	return []string{
		"--kubeconfig", c.Kubeconfig, "--leader-elect=false", "--secure-port=0",
		// No pod CIDRs to allocate (the CNI plugin has its own): without
		// it the node keeps its network-unavailable taint.
		"--controllers=*,-node-ipam-controller",
		"--service-account-private-key-file", c.pki.saKey, "--root-ca-file", c.pki.caCert,
		"--use-service-account-credentials=false", "--profiling=false", "--v=1",
	}
}

func (c *Cluster) schedulerArgs() []string {
	return []string{"--kubeconfig", c.Kubeconfig, "--leader-elect=false", "--secure-port=0", "--profiling=false", "--v=1"}
}

// kubeletConfig: cgroupfs (the airlock runtime manages cgroupfs paths),
// cgroup v1 allowed, the server on the node IP only, x509 clients of the
// cluster's CA, eviction thresholds a test machine's disk does not cross.
func (c *Cluster) kubeletConfig() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://%[1]s
address: %[2]s
port: 10250
readOnlyPort: 0
healthzPort: 0
podLogsDir: %[3]s
failSwapOn: false
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {"memory.available": "1Mi", "nodefs.available": "1%%", "imagefs.available": "1%%", "nodefs.inodesFree": "1%%"}
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %[4]s}
authorization: {mode: AlwaysAllow}
`, c.ContainerdSocket, nodeIP, filepath.Join(c.Dir, "pod-logs"), c.pki.caCert)
}

func (c *Cluster) kubeletArgs(cfg string) []string {
	labels := "airlock.dev/runtime=installed"
	if c.Gvisor {
		labels += ",airlock.dev/gvisor=installed"
	}
	return []string{
		"--config", cfg, "--kubeconfig", c.Kubeconfig,
		"--root-dir", filepath.Join(c.Dir, "kubelet"), "--cert-dir", filepath.Join(c.Dir, "kubelet-pki"),
		"--node-ip", nodeIP, "--hostname-override", NodeName,
		"--node-labels", labels, "--v=1",
	}
}

// crds returns agent-sandbox's CRDs (scripts/kube.sh copies them beside
// the binaries) with webhook conversion turned off: the controller runs
// without its webhook, and every version is served as stored.
func (c *Cluster) crds() (string, error) {
	files, _ := filepath.Glob(filepath.Join(c.BinDir, "crds", "*.yaml"))
	if len(files) == 0 {
		return "", fmt.Errorf("no agent-sandbox CRDs in %s/crds (scripts/kube.sh copies them)", c.BinDir)
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		out = append(out, noConversion(string(b)))
	}
	return strings.Join(out, "\n---\n"), nil
}

// noConversion replaces a CRD's top-level spec.conversion block with
// strategy None.
func noConversion(crd string) string {
	lines := strings.Split(crd, "\n")
	var out []string
	for i := 0; i < len(lines); i++ {
		if lines[i] != "  conversion:" {
			out = append(out, lines[i])
			continue
		}
		out = append(out, "  conversion:", "    strategy: None")
		for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "    ") {
			i++
		}
	}
	return strings.Join(out, "\n")
}
