package main

import (
	"flag"
	"time"

	"github.com/airlock-dev/airlock/backend/kubernetes"
)

// kubeFlags configure the kubernetes backend of `airlock serve` (used
// only with --backend kubernetes).
type kubeFlags struct {
	kubeconfig, namespace, runtimeClass string
	image, nodeAgent, warmPool          string
	readyTimeout                        time.Duration
}

func (k *kubeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "kubernetes backend: kubeconfig file (default: $KUBECONFIG, ~/.kube/config, else in-cluster)")
	fs.StringVar(&k.namespace, "kube-namespace", "", "kubernetes backend: namespace of the sandboxes (default: the kubeconfig context's, else default)")
	fs.StringVar(&k.runtimeClass, "kube-runtime-class", kubernetes.DefaultRuntimeClass, "kubernetes backend: RuntimeClass of the sandboxes' pods")
	fs.StringVar(&k.image, "kube-image", kubernetes.DefaultImage, "kubernetes backend: image of a sandbox whose request names none")
	fs.StringVar(&k.nodeAgent, "kube-node-airlock", kubernetes.DefaultNodeAgent, "kubernetes backend: path of the airlock binary on the nodes (mounted read-only as the agent)")
	fs.StringVar(&k.warmPool, "kube-warm-pool", "", "kubernetes backend: SandboxWarmPool to claim sandboxes from (default: a new Sandbox each)")
	fs.DurationVar(&k.readyTimeout, "kube-ready-timeout", kubernetes.DefaultReadyTimeout, "kubernetes backend: how long a sandbox's pod may take to be ready")
}

func (k *kubeFlags) config() kubernetes.Config {
	return kubernetes.Config{
		Kubeconfig: k.kubeconfig, Namespace: k.namespace, RuntimeClass: k.runtimeClass,
		Image: k.image, NodeAgent: k.nodeAgent, WarmPool: k.warmPool, ReadyTimeout: k.readyTimeout,
	}
}
