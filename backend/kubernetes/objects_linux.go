package kubernetes

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sandboxv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/airlock-dev/airlock/policy"
)

// sandboxObject is the Sandbox of one sandbox: its pod, labelled, and when
// the policy has a timeout a shutdown time, so that the cluster deletes
// it even when the server that made it is gone.
func sandboxObject(name, ns string, labels map[string]string, pod corev1.PodSpec, timeout time.Duration, now time.Time) *sandboxv1.Sandbox {
	sb := &sandboxv1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: sandboxv1.SandboxSpec{
			SandboxBlueprint: sandboxv1.SandboxBlueprint{
				PodTemplate: sandboxv1.PodTemplate{Spec: pod, ObjectMeta: sandboxv1.PodMetadata{Labels: labels}},
				Service:     ptr(false),
			},
		},
	}
	if timeout > 0 {
		sb.Spec.ShutdownTime = &metav1.Time{Time: now.Add(timeout).Add(time.Minute)}
		sb.Spec.ShutdownPolicy = ptr(sandboxv1.ShutdownPolicyDelete)
	}
	return sb
}

// claimObject is the SandboxClaim of one sandbox against pool.
func claimObject(name, ns, pool string, labels map[string]string, timeout time.Duration, now time.Time) *extv1.SandboxClaim {
	c := &extv1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		// No pod labels: agent-sandbox lets a claim add only labels of
		// domains on its allow-list to the pool's pod. The claim carries
		// them, and Destroy and Cleanup go through the claim.
		Spec: extv1.SandboxClaimSpec{WarmPoolRef: extv1.SandboxWarmPoolRef{Name: pool}},
	}
	if timeout > 0 {
		c.Spec.Lifecycle = &extv1.Lifecycle{
			ShutdownTime:   &metav1.Time{Time: now.Add(timeout).Add(time.Minute)},
			ShutdownPolicy: extv1.ShutdownPolicyDelete,
		}
	}
	return c
}

// Template is a SandboxTemplate whose pods a warm pool of this backend can
// hold: the pod Create would make for pol (nil: the default profile
// without a workspace's host path) with image, no injected files. A pool
// pod's agent waits on its stdin until a claim's attach speaks to it.
func (b *Backend) Template(name, ns, image string, pol *policy.Policy) (*extv1.SandboxTemplate, error) {
	if pol == nil {
		p, err := policy.Profile("default")
		if err != nil {
			return nil, err
		}
		p.Filesystem.ReadOnly, p.Filesystem.ReadWrite, p.Filesystem.Deny = nil, nil, nil
		p.Filesystem.Workspace, p.Filesystem.WorkspaceMount = "/workspace", "/workspace"
		pol = p
	}
	if image == "" {
		image = b.cfg.Image
	}
	pod, err := podSpec(podInput{Policy: pol, Image: image, RuntimeClass: b.cfg.RuntimeClass, NodeAgent: b.cfg.NodeAgent})
	if err != nil {
		return nil, err
	}
	labels := map[string]string{LabelOwner: b.cfg.Owner, LabelBackend: Name}
	return &extv1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: extv1.SandboxTemplateSpec{
			SandboxBlueprint: sandboxv1.SandboxBlueprint{
				PodTemplate: sandboxv1.PodTemplate{Spec: pod, ObjectMeta: sandboxv1.PodMetadata{Labels: labels}},
				Service:     ptr(false),
			},
			NetworkPolicyManagement: extv1.NetworkPolicyManagementUnmanaged,
		},
	}, nil
}
