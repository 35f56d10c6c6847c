package kubernetes

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sandboxv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

func fakeBackend(t *testing.T, cfg Config, objs ...client.Object) (*Backend, client.Client) {
	t.Helper()
	s, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	cfg.Namespace = "default"
	return newWith(cfg, &rest.Config{Host: "https://127.0.0.1:1"}, c), c
}

func testSpec() sandbox.Spec {
	pol := testPolicy()
	pol.Filesystem.Workspace, pol.Filesystem.ReadWrite = "/srv/ws", []string{"/srv/ws"}
	return sandbox.Spec{ID: "sb-1", Policy: pol, Files: []sandbox.File{{Path: "/run/airlock/ca.pem", Data: []byte("pem")}}}
}

// count is how many objects of list's kind there are.
func count(t *testing.T, c client.Client, list client.ObjectList) int {
	t.Helper()
	if err := c.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	switch l := list.(type) {
	case *sandboxv1.SandboxList:
		return len(l.Items)
	case *corev1.SecretList:
		return len(l.Items)
	case *extv1.SandboxClaimList:
		return len(l.Items)
	}
	t.Fatalf("list %T", list)
	return 0
}

// A pod whose image cannot be pulled fails Create at once with the
// image's name, and Create deletes the Sandbox and Secret it made.
func TestCreateBadImageLeavesNothing(t *testing.T) {
	b, c := fakeBackend(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() {
		// The kubelet's part: once Create made the Sandbox, its pod fails
		// to pull (polled until the test ends, never longer).
		for ctx.Err() == nil {
			sb := &sandboxv1.Sandbox{}
			if c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "airlock-sb-1"}, sb) == nil {
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: sb.Name, Namespace: "default"},
					Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
						Name: ContainerName, Image: "nope:1",
						State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}},
					}}}}
				c.Create(context.Background(), pod)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	_, err := b.Create(ctx, testSpec())
	if !errors.Is(err, sandbox.ErrNotFound) || !strings.Contains(err.Error(), "nope:1") {
		t.Fatalf("create: %v", err)
	}
	if n, m := count(t, c, &sandboxv1.SandboxList{}), count(t, c, &corev1.SecretList{}); n != 0 || m != 0 {
		t.Fatalf("left %d sandboxes, %d secrets", n, m)
	}
}

// A pod that never runs fails after ReadyTimeout, saying what it saw, and
// leaves nothing.
func TestCreateTimeoutLeavesNothing(t *testing.T) {
	b, c := fakeBackend(t, Config{ReadyTimeout: 300 * time.Millisecond})
	_, err := b.Create(context.Background(), testSpec())
	if !errors.Is(err, sandbox.ErrTimeout) || !strings.Contains(err.Error(), "not ready within") {
		t.Fatalf("create: %v", err)
	}
	if n, m := count(t, c, &sandboxv1.SandboxList{}), count(t, c, &corev1.SecretList{}); n != 0 || m != 0 {
		t.Fatalf("left %d sandboxes, %d secrets", n, m)
	}
}

// A policy the pod cannot honour is refused before anything is made.
func TestCreateRefusesHostPath(t *testing.T) {
	b, c := fakeBackend(t, Config{})
	spec := testSpec()
	spec.Policy.Filesystem.ReadOnly = append(spec.Policy.Filesystem.ReadOnly, "/var/lib/kubelet")
	if _, err := b.Create(context.Background(), spec); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("create: %v", err)
	}
	if n := count(t, c, &corev1.SecretList{}); n != 0 {
		t.Fatalf("left %d secrets", n)
	}
}

// With a warm pool, a networked policy and a pool whose pods are bigger
// than the policy asks are refused, and no claim is made.
func TestClaimRefusals(t *testing.T) {
	b, _ := fakeBackend(t, Config{WarmPool: "pool"})
	pol := testPolicy()
	pol.Limits.Memory = 256 << 20
	tpl, err := b.Template("tpl", "default", "", pol)
	if err != nil {
		t.Fatal(err)
	}
	pool := &extv1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "default"},
		Spec: extv1.SandboxWarmPoolSpec{TemplateRef: extv1.SandboxTemplateRef{Name: "tpl"}}}
	b, c := fakeBackend(t, Config{WarmPool: "pool"}, tpl, pool)
	spec := testSpec()
	spec.Policy.Network.Mode = policy.NetworkOpen
	if _, err := b.Create(context.Background(), spec); !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), "egress CA") {
		t.Fatalf("networked claim: %v", err)
	}
	spec = testSpec() // 512Mi asked, the pool's pods have 256Mi: fine
	spec.Policy.Limits.Memory = 128 << 20
	if _, err := b.Create(context.Background(), spec); !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), "limit memory") {
		t.Fatalf("pool above the policy's memory: %v", err)
	}
	if n := count(t, c, &extv1.SandboxClaimList{}); n != 0 {
		t.Fatalf("left %d claims", n)
	}
}

// Cleanup deletes its own owner's objects not kept, and nothing else.
func TestCleanupKeepsOthers(t *testing.T) {
	mk := func(id, owner string) *sandboxv1.Sandbox {
		return &sandboxv1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: objectName(id), Namespace: "default",
			Labels: map[string]string{LabelSandbox: id, LabelOwner: owner, LabelBackend: Name}}}
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: objectName("gone"), Namespace: "default",
		Labels: map[string]string{LabelSandbox: "gone", LabelOwner: "me", LabelBackend: Name}}}
	b, c := fakeBackend(t, Config{Owner: "me"}, mk("kept", "me"), mk("gone", "me"), mk("theirs", "other"), sec)
	if err := b.Cleanup(context.Background(), map[string]bool{"kept": true}); err != nil {
		t.Fatal(err)
	}
	list := &sandboxv1.SandboxList{}
	if err := c.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, s := range list.Items {
		left = append(left, s.Labels[LabelSandbox])
	}
	if strings.Join(left, ",") != "kept,theirs" && strings.Join(left, ",") != "theirs,kept" {
		t.Fatalf("left %v", left)
	}
	if n := count(t, c, &corev1.SecretList{}); n != 0 {
		t.Fatalf("left %d secrets", n)
	}
}

// An unreachable API server makes the backend unavailable, saying so.
func TestProbeUnreachable(t *testing.T) {
	b := newWith(Config{}, &rest.Config{Host: "https://127.0.0.1:1"}, nil)
	p := b.Probe(context.Background())
	if p.Available || !strings.Contains(p.Reason, "unreachable") {
		t.Fatalf("probe: %+v", p)
	}
}

// poolMismatch refuses a weaker or bigger pool pod and accepts the same.
func TestPoolMismatch(t *testing.T) {
	want, err := podSpec(testInput())
	if err != nil {
		t.Fatal(err)
	}
	if why := poolMismatch(*want.DeepCopy(), want); why != "" {
		t.Fatalf("same pod: %s", why)
	}
	for name, edit := range map[string]func(*corev1.PodSpec){
		"runtime class": func(p *corev1.PodSpec) { p.RuntimeClassName = ptr("runc") },
		"image":         func(p *corev1.PodSpec) { p.Containers[0].Image = "other" },
		"security context": func(p *corev1.PodSpec) {
			p.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
		},
		"service account token": func(p *corev1.PodSpec) { p.AutomountServiceAccountToken = ptr(true) },
		"limit memory":          func(p *corev1.PodSpec) { delete(p.Containers[0].Resources.Limits, corev1.ResourceMemory) },
		"no volume at":          func(p *corev1.PodSpec) { p.Containers[0].VolumeMounts = p.Containers[0].VolumeMounts[:1] },
	} {
		have := *want.DeepCopy()
		edit(&have)
		if why := poolMismatch(have, want); !strings.Contains(why, name) {
			t.Errorf("%s: %q", name, why)
		}
	}
}
