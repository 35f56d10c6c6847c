package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
)

// Cleanup deletes the claims, Sandboxes and Secrets of this backend's
// owner whose sandbox is not in keep (a server's that crashed). Pods go
// with their Sandbox. Idempotent.
func (b *Backend) Cleanup(ctx context.Context, keep map[string]bool) error {
	cl, err := b.cluster()
	if err != nil {
		return err
	}
	kept := map[string]bool{}
	for id := range keep {
		kept[labelValue(id)] = true
	}
	sel := client.MatchingLabels{LabelOwner: b.cfg.Owner, LabelBackend: Name}
	in := client.InNamespace(cl.ns)
	var errs []error
	claims := &extv1.SandboxClaimList{}
	if err := cl.c.List(ctx, claims, in, sel); err != nil {
		errs = append(errs, fmt.Errorf("list sandboxclaims: %w", apiKind(err)))
	}
	for i := range claims.Items {
		if c := &claims.Items[i]; !kept[c.Labels[LabelSandbox]] {
			errs = append(errs, deleteClaim(cl, c))
		}
	}
	sbs := &sandboxv1.SandboxList{}
	if err := cl.c.List(ctx, sbs, in, sel); err != nil {
		errs = append(errs, fmt.Errorf("list sandboxes: %w", apiKind(err)))
	}
	for i := range sbs.Items {
		if s := &sbs.Items[i]; !kept[s.Labels[LabelSandbox]] {
			errs = append(errs, deleteObject(cl.c, s))
		}
	}
	secs := &corev1.SecretList{}
	if err := cl.c.List(ctx, secs, in, sel); err != nil {
		errs = append(errs, fmt.Errorf("list secrets: %w", apiKind(err)))
	}
	for i := range secs.Items {
		if s := &secs.Items[i]; !kept[s.Labels[LabelSandbox]] {
			errs = append(errs, deleteObject(cl.c, s))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kubernetes cleanup: %w", err)
	}
	return nil
}

// waitGone waits until pod no longer exists (its deletion was asked).
func (b *Backend) waitGone(cl *cluster, pod string) error {
	if pod == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		err := cl.c.Get(ctx, client.ObjectKey{Namespace: cl.ns, Name: pod}, &corev1.Pod{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("pod %s still there after a minute: %w", pod, apiKind(ctx.Err()))
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}
