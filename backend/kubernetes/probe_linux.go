package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	nodev1 "k8s.io/api/node/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/airlock-dev/airlock/sandbox"
)

// isolation is what a pod under the airlock runtime class gets: the
// native backend's protections on the node's kernel.
const isolation = "kernel"

// needed are the agent-sandbox resources the backend uses, by group
// version (the CRDs' storage version).
var needed = map[string][]string{
	sandboxv1.GroupVersion.String(): {"sandboxes"},
	extv1.GroupVersion.String():     {"sandboxclaims", "sandboxtemplates", "sandboxwarmpools"},
}

// Probe reports whether the cluster can run sandboxes: the API server
// answers, agent-sandbox's CRDs are served, the runtime class exists (and
// the warm pool, when one is configured). Each missing piece is named.
func (b *Backend) Probe(ctx context.Context) sandbox.Probe {
	p := sandbox.Probe{Isolation: isolation, Details: map[string]string{"runtime_class": b.cfg.RuntimeClass}}
	cl, err := b.cluster()
	if err != nil {
		p.Reason = err.Error()
		return p
	}
	p.Details["namespace"] = cl.ns
	p.Details["api_server"] = cl.rest.Host
	var why []string
	r := rest.CopyConfig(cl.rest)
	r.Timeout = 10 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(r)
	if err != nil {
		p.Reason = fmt.Sprintf("kubernetes API server %s: %v", cl.rest.Host, err)
		return p
	}
	v, err := dc.ServerVersion()
	if err != nil {
		p.Reason = fmt.Sprintf("kubernetes API server %s unreachable: %v", cl.rest.Host, err)
		return p
	}
	p.Details["server_version"] = v.GitVersion
	why = append(why, missingCRDs(dc)...)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := cl.c.Get(ctx, client.ObjectKey{Name: b.cfg.RuntimeClass}, &nodev1.RuntimeClass{}); err != nil {
		why = append(why, fmt.Sprintf("RuntimeClass %q: %v (kubectl apply -f deploy/kubernetes/runtimeclass.yaml)", b.cfg.RuntimeClass, err))
	}
	if b.cfg.WarmPool != "" {
		if err := cl.c.Get(ctx, client.ObjectKey{Namespace: cl.ns, Name: b.cfg.WarmPool}, &extv1.SandboxWarmPool{}); err != nil {
			why = append(why, fmt.Sprintf("SandboxWarmPool %q in %s: %v", b.cfg.WarmPool, cl.ns, err))
		}
	}
	if len(why) > 0 {
		p.Reason = strings.Join(why, "; ")
		return p
	}
	p.Available = true
	return p
}

// missingCRDs names the agent-sandbox resources the API server does not
// serve.
func missingCRDs(dc discovery.DiscoveryInterface) []string {
	var why []string
	for _, gv := range []string{sandboxv1.GroupVersion.String(), extv1.GroupVersion.String()} {
		list, err := dc.ServerResourcesForGroupVersion(gv)
		served := map[string]bool{}
		if err == nil {
			for _, r := range list.APIResources {
				served[r.Name] = true
			}
		}
		for _, res := range needed[gv] {
			if !served[res] {
				why = append(why, fmt.Sprintf("CRD %s (%s) not served: install agent-sandbox v0.5.6's CRDs", res, gv))
			}
		}
	}
	slices.Sort(why)
	return why
}
