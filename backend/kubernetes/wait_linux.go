package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/airlock-dev/airlock/sandbox"
)

// pollInterval is how often Create looks at the objects it waits for.
const pollInterval = 100 * time.Millisecond

// waitReady waits until the sandbox's pod runs its agent (p.pod is then
// set), failing at once for a pod that cannot start (a bad image, a
// container the runtime refused) and after ReadyTimeout for one that never
// does, saying what it saw last.
func (b *Backend) waitReady(ctx context.Context, p *prepared) error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.ReadyTimeout)
	defer cancel()
	last := "no pod yet"
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		pod, err := b.findPod(ctx, p)
		switch {
		case errors.Is(err, sandbox.ErrPermission) || errors.Is(err, sandbox.ErrInvalid):
			return err
		case err != nil:
			// The API server busy, a watch cache behind: look again.
			if !strings.Contains(last, "; last error: ") {
				last += "; last error: " + err.Error()
			}
		case pod != nil:
			if err := podFailure(pod); err != nil {
				return err
			}
			if podRunning(pod) {
				p.pod = pod.Name
				return nil
			}
			last = podState(pod)
		}
		select {
		case <-ctx.Done():
			if ctxErr := context.Cause(ctx); errors.Is(ctxErr, context.DeadlineExceeded) {
				return fmt.Errorf("pod of %s not ready within %s (%s): %w", p.name, b.cfg.ReadyTimeout, last, errors.Join(sandbox.ErrTimeout, sandbox.ErrUnavailable))
			}
			return fmt.Errorf("wait for pod of %s (%s): %w", p.name, last, errors.Join(ctx.Err(), sandbox.ErrTimeout))
		case <-t.C:
		}
	}
}

// findPod returns the sandbox's pod, nil while there is none yet.
func (b *Backend) findPod(ctx context.Context, p *prepared) (*corev1.Pod, error) {
	c, ns := p.cl.c, p.cl.ns
	name := p.name
	if claim, ok := p.obj.(*extv1.SandboxClaim); ok {
		if err := c.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
			return nil, fmt.Errorf("get sandboxclaim %s: %w", claim.Name, apiKind(err))
		}
		for _, cond := range claim.Status.Conditions {
			if cond.Reason == "InvalidMetadata" || cond.Reason == "TemplateNotFound" {
				return nil, fmt.Errorf("sandboxclaim %s: %s: %s: %w", claim.Name, cond.Reason, cond.Message, sandbox.ErrInvalid)
			}
		}
		if name = claim.Status.SandboxStatus.Name; name == "" {
			return nil, nil
		}
	}
	sb := &sandboxv1.Sandbox{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sb); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get sandbox %s: %w", name, apiKind(err))
	}
	podName := sb.Name
	if n := sb.Annotations[sandboxv1.SandboxPodNameAnnotation]; n != "" {
		podName = n
	}
	pod := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: podName}, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get pod %s: %w", podName, apiKind(err))
	}
	return pod, nil
}

// apiKind wraps an API error with the sandbox error kind it means.
func apiKind(err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%v: %w", err, sandbox.ErrNotFound)
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return fmt.Errorf("%v: %w", err, sandbox.ErrPermission)
	}
	return fmt.Errorf("%v: %w", err, sandbox.ErrUnavailable)
}

func podRunning(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == ContainerName {
			return cs.State.Running != nil
		}
	}
	return false
}

// Waiting reasons of a container that will not start by waiting longer.
var (
	imageReasons   = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "ErrImageNeverPull": true, "InvalidImageName": true}
	runtimeReasons = map[string]bool{"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true, "CrashLoopBackOff": true}
)

// podFailure says why pod will never run its agent, or nil.
func podFailure(pod *corev1.Pod) error {
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return fmt.Errorf("pod %s ended before the agent was reached (%s): %w", pod.Name, podState(pod), sandbox.ErrUnavailable)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			if imageReasons[w.Reason] {
				return fmt.Errorf("pod %s: image %q: %s: %s: %w", pod.Name, cs.Image, w.Reason, w.Message, sandbox.ErrNotFound)
			}
			if runtimeReasons[w.Reason] {
				return fmt.Errorf("pod %s: %s: %s: %w", pod.Name, w.Reason, w.Message, sandbox.ErrUnavailable)
			}
		}
		if t := cs.State.Terminated; t != nil {
			return fmt.Errorf("pod %s: container exited (%d, %s): %s: %w", pod.Name, t.ExitCode, t.Reason, t.Message, sandbox.ErrUnavailable)
		}
	}
	return nil
}

// podState is a short description of where pod is, for errors.
func podState(pod *corev1.Pod) string {
	parts := []string{"phase " + string(pod.Status.Phase)}
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			parts = append(parts, fmt.Sprintf("%s: %s %s", c.Type, c.Reason, c.Message))
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			parts = append(parts, fmt.Sprintf("container %s: %s %s", cs.Name, w.Reason, w.Message))
		}
	}
	return strings.Join(parts, "; ")
}

// checkPool refuses a warm pool whose pods are not what the policy would
// get: another runtime class, image or agent, weaker protections, limits
// above the policy's, or a directory the policy has missing.
func (b *Backend) checkPool(ctx context.Context, cl *cluster, want corev1.PodSpec) error {
	pool := &extv1.SandboxWarmPool{}
	if err := cl.c.Get(ctx, client.ObjectKey{Namespace: cl.ns, Name: b.cfg.WarmPool}, pool); err != nil {
		return fmt.Errorf("warm pool %q: %w", b.cfg.WarmPool, apiKind(err))
	}
	tpl := &extv1.SandboxTemplate{}
	if err := cl.c.Get(ctx, client.ObjectKey{Namespace: cl.ns, Name: pool.Spec.TemplateRef.Name}, tpl); err != nil {
		return fmt.Errorf("warm pool %q: template %q: %w", b.cfg.WarmPool, pool.Spec.TemplateRef.Name, apiKind(err))
	}
	if why := poolMismatch(tpl.Spec.PodTemplate.Spec, want); why != "" {
		return fmt.Errorf("warm pool %q (template %s): %s: %w", b.cfg.WarmPool, tpl.Name, why, sandbox.ErrInvalid)
	}
	return nil
}

// poolMismatch says how a pool's pod differs from the pod wanted, "" when
// the pool's pod gives no more than the wanted one.
func poolMismatch(have, want corev1.PodSpec) string {
	if len(have.Containers) != 1 || have.Containers[0].Name != ContainerName {
		return "its pod does not have the one container " + ContainerName
	}
	hc, wc := have.Containers[0], want.Containers[0]
	switch {
	case deref(have.RuntimeClassName) != deref(want.RuntimeClassName):
		return fmt.Sprintf("runtime class %q, want %q", deref(have.RuntimeClassName), deref(want.RuntimeClassName))
	case hc.Image != wc.Image:
		return fmt.Sprintf("image %q, want %q", hc.Image, wc.Image)
	case !equality.Semantic.DeepEqual(hc.Command, wc.Command) || !hc.Stdin || !hc.StdinOnce:
		return "its container is not the agent on an attachable stdin"
	case !equality.Semantic.DeepEqual(hc.SecurityContext, wc.SecurityContext):
		return "its container's security context differs from the policy's"
	case deref(have.AutomountServiceAccountToken) || have.HostNetwork || have.HostPID || have.HostIPC:
		return "its pod has a service account token or host namespaces"
	}
	for res, w := range wc.Resources.Limits {
		h, ok := hc.Resources.Limits[res]
		if !ok || h.Cmp(w) > 0 {
			return fmt.Sprintf("limit %s %s, the policy's is %s", res, h.String(), w.String())
		}
	}
	mounted := map[string]bool{}
	for _, m := range hc.VolumeMounts {
		mounted[m.MountPath] = true
	}
	for _, m := range wc.VolumeMounts {
		if !mounted[m.MountPath] {
			return fmt.Sprintf("no volume at %s", m.MountPath)
		}
	}
	return ""
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// deleteClaim deletes a claim and the Sandbox it was given.
func deleteClaim(cl *cluster, c *extv1.SandboxClaim) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cur := &extv1.SandboxClaim{}
	name := c.Status.SandboxStatus.Name
	if err := cl.c.Get(ctx, client.ObjectKeyFromObject(c), cur); err == nil && cur.Status.SandboxStatus.Name != "" {
		name = cur.Status.SandboxStatus.Name
	}
	err := deleteObject(cl.c, c)
	if name != "" {
		err = errors.Join(err, deleteObject(cl.c, &sandboxv1.Sandbox{ObjectMeta: metaName(cl.ns, name)}))
	}
	return err
}
