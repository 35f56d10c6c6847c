package kubernetes

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"regexp"
	"sync"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/airlock-dev/airlock/sandbox"
)

// Backend is the Kubernetes sandbox backend. Create it with New; it is safe
// for concurrent use and contacts the API server only when first used.
type Backend struct {
	cfg Config
	log *slog.Logger
	// rest and client, when set (newWith), are used instead of loading
	// the kubeconfig: tests, with a fake client.
	rest   *rest.Config
	client client.Client

	mu   sync.Mutex
	conn *cluster // made on first use
}

// cluster is what talking to the API server needs.
type cluster struct {
	rest *rest.Config
	c    client.Client
	ns   string
}

// New returns the Kubernetes backend.
func New(cfg Config) *Backend { return newWith(cfg, nil, nil) }

// newWith is New with the API server's config and client given (tests).
func newWith(cfg Config, r *rest.Config, c client.Client) *Backend {
	if cfg.RuntimeClass == "" {
		cfg.RuntimeClass = DefaultRuntimeClass
	}
	if cfg.NodeAgent == "" {
		cfg.NodeAgent = DefaultNodeAgent
	}
	if cfg.Image == "" {
		cfg.Image = DefaultImage
	}
	if cfg.Owner == "" {
		cfg.Owner = "airlock"
	}
	cfg.Owner = labelValue(cfg.Owner)
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = DefaultReadyTimeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Backend{cfg: cfg, log: cfg.Log.With("backend", Name), rest: r, client: c}
}

// Name returns "kubernetes".
func (b *Backend) Name() string { return Name }

// Scheme holds the types this backend reads and writes: core and node
// objects, agent-sandbox's Sandbox and its extensions (storage version
// v1beta1).
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, nodev1.AddToScheme, sandboxv1.AddToScheme, extv1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// cluster connects on first use.
func (b *Backend) cluster() (*cluster, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn != nil {
		return b.conn, nil
	}
	cl := &cluster{rest: b.rest, c: b.client, ns: b.cfg.Namespace}
	if cl.rest == nil {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if b.cfg.Kubeconfig != "" {
			rules.ExplicitPath = b.cfg.Kubeconfig
		}
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
		r, err := cc.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubernetes: load kubeconfig: %v: %w", err, sandbox.ErrUnavailable)
		}
		if cl.ns == "" {
			if ns, _, err := cc.Namespace(); err == nil {
				cl.ns = ns
			}
		}
		cl.rest = r
	}
	if cl.ns == "" {
		cl.ns = "default"
	}
	// client-go's default (5 requests a second) would make sandboxes
	// starting together wait on each other's polling.
	cl.rest = rest.CopyConfig(cl.rest)
	if cl.rest.QPS == 0 {
		cl.rest.QPS, cl.rest.Burst = 100, 200
	}
	if cl.c == nil {
		s, err := Scheme()
		if err != nil {
			return nil, fmt.Errorf("kubernetes: scheme: %v: %w", err, sandbox.ErrUnavailable)
		}
		if cl.c, err = client.New(cl.rest, client.Options{Scheme: s}); err != nil {
			return nil, fmt.Errorf("kubernetes: client: %v: %w", err, sandbox.ErrUnavailable)
		}
	}
	b.conn = cl
	return cl, nil
}

func (b *Backend) labels(id string) map[string]string {
	return map[string]string{LabelSandbox: labelValue(id), LabelOwner: b.cfg.Owner, LabelBackend: Name}
}

// objectName is the name of a sandbox's objects: "airlock-" and the ID
// lowercased, with a hash of the ID when it is not a DNS label as it is.
func objectName(id string) string {
	n := "airlock-" + id
	if len(n) <= 53 && dnsLabel().MatchString(n) {
		return n
	}
	h := sha256.Sum256([]byte(id))
	return fmt.Sprintf("airlock-%x", h[:10])
}

var (
	dnsLabel   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`) })
	labelChars = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`) })
)

// labelValue is s when it is a valid label value, else a hash of it
// (an owner such as a data directory's path).
func labelValue(s string) string {
	if len(s) <= 63 && labelChars().MatchString(s) {
		return s
	}
	h := sha256.Sum256([]byte(s))
	return fmt.Sprintf("h-%x", h[:12])
}

// Namespace is the namespace the sandboxes live in, for tests and tools.
func (b *Backend) Namespace(ctx context.Context) (string, error) {
	cl, err := b.cluster()
	if err != nil {
		return "", err
	}
	return cl.ns, nil
}

var _ sandbox.Backend = (*Backend)(nil)
