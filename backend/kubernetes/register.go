package kubernetes

import (
	"flag"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/sandbox"
)

// flagConfig is what serve's --kube-* flags set: a process parses its
// flags once, before it opens backends.
var flagConfig = Config{
	RuntimeClass: DefaultRuntimeClass, Image: DefaultImage,
	NodeAgent: DefaultNodeAgent, ReadyTimeout: DefaultReadyTimeout,
}

func init() {
	backend.Register(backend.Factory{Name: Name, Remote: true, Flags: registerFlags, Open: func(e backend.Env) (sandbox.Backend, error) {
		cfg := flagConfig
		cfg.Log = e.Log
		if cfg.Owner == "" {
			cfg.Owner = e.CgroupParent // "" (the default owner) when serve sets none
		}
		return New(cfg), nil
	}})
}

// registerFlags adds the backend's flags of `airlock serve` (used only
// with --backend kubernetes).
func registerFlags(fs *flag.FlagSet) {
	k := &flagConfig
	fs.StringVar(&k.Kubeconfig, "kubeconfig", "", "kubernetes backend: kubeconfig file (default: $KUBECONFIG, ~/.kube/config, else in-cluster)")
	fs.StringVar(&k.Namespace, "kube-namespace", "", "kubernetes backend: namespace of the sandboxes (default: the kubeconfig context's, else default)")
	fs.StringVar(&k.RuntimeClass, "kube-runtime-class", DefaultRuntimeClass, "kubernetes backend: RuntimeClass of the sandboxes' pods")
	fs.StringVar(&k.Image, "kube-image", DefaultImage, "kubernetes backend: image of a sandbox whose request names none")
	fs.StringVar(&k.NodeAgent, "kube-node-airlock", DefaultNodeAgent, "kubernetes backend: path of the airlock binary on the nodes (mounted read-only as the agent)")
	fs.StringVar(&k.WarmPool, "kube-warm-pool", "", "kubernetes backend: SandboxWarmPool to claim sandboxes from (default: a new Sandbox each)")
	fs.DurationVar(&k.ReadyTimeout, "kube-ready-timeout", DefaultReadyTimeout, "kubernetes backend: how long a sandbox's pod may take to be ready")
}
