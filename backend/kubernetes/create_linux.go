package kubernetes

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/airlock-dev/airlock/agent"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/backend/internal/agentbox"
	"github.com/airlock-dev/airlock/backend/internal/prep"
	"github.com/airlock-dev/airlock/backend/internal/undo"
	"github.com/airlock-dev/airlock/egress"
	"github.com/airlock-dev/airlock/internal/logtail"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// prepared is what Create decided, and then made.
type prepared struct {
	spec  sandbox.Spec
	pol   *policy.Policy
	log   *slog.Logger
	sink  audit.Sink
	cl    *cluster
	name  string // the Sandbox's (or claim's) name
	image string
	t0    time.Time
	// Filled in by the later stages.
	obj  client.Object // the Sandbox or SandboxClaim made
	pod  string
	conn *attachConn
	tail *logtail.Tail
}

func (p *prepared) wrap(format string, args ...any) error {
	return prep.Wrap(p.spec.ID, format, args...)
}

// Create starts a sandbox. See sandbox.Backend. It runs the stages in
// order — prepare (decide; touch nothing), objects (the files' Secret and
// the Sandbox, or the claim), ready (the pod is Ready), attach, connect
// (the agent's Hello) — each registering what undoes it.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (_ sandbox.Sandbox, err error) {
	p, err := b.prepare(spec)
	if err != nil {
		return nil, err
	}
	var u undo.Stack
	defer func() {
		if err != nil {
			u.Run()
		}
	}()
	if b.cfg.WarmPool != "" {
		err = b.claim(ctx, p, &u)
	} else {
		err = b.makeSandbox(ctx, p, &u)
	}
	if err != nil {
		return nil, p.wrap("%w", err)
	}
	if err := b.waitReady(ctx, p); err != nil {
		return nil, p.wrap("%w", err)
	}
	p.tail = &logtail.Tail{Max: 8 << 10}
	if p.conn, err = attach(p.cl.rest, p.cl.ns, p.pod, p.log, p.tail); err != nil {
		return nil, p.wrap("%w", err)
	}
	conn := p.conn
	u.Push(func() { conn.Close() })
	s, err := b.connect(ctx, p, &u)
	if err != nil {
		return nil, p.wrap("%w", err)
	}
	return s, nil
}

// prepare checks the spec and connects to the cluster.
func (b *Backend) prepare(spec sandbox.Spec) (*prepared, error) {
	// The agent that runs is the node's; this process's binary is
	// named only for the shared checks.
	c, err := prep.Check(spec, "/proc/self/exe", b.log)
	if err != nil {
		return nil, err
	}
	p := &prepared{spec: spec, pol: c.Policy, log: c.Log, sink: c.Sink, t0: c.Start, name: objectName(spec.ID), image: spec.Image}
	if p.image == "" {
		p.image = b.cfg.Image
	}
	if spec.Root != nil && len(spec.Root.Layers) > 0 {
		return nil, p.wrap("image %q: the kubernetes backend runs images the cluster pulls, not unpacked layers: %w", spec.Image, sandbox.ErrInvalid)
	}
	if p.cl, err = b.cluster(); err != nil {
		return nil, p.wrap("%w", err)
	}
	return p, nil
}

// makeSandbox creates the files' Secret and the Sandbox.
func (b *Backend) makeSandbox(ctx context.Context, p *prepared, u *undo.Stack) error {
	labels := b.labels(p.spec.ID)
	pod, err := podSpec(podInput{Policy: p.pol, Image: p.image, Files: p.spec.Files, Caches: p.spec.Caches,
		RuntimeClass: b.cfg.RuntimeClass, NodeAgent: b.cfg.NodeAgent, Secret: p.name})
	if err != nil {
		return err
	}
	if sec := filesSecret(p.name, p.cl.ns, labels, p.spec.Files); sec != nil {
		if err := p.cl.c.Create(ctx, sec); err != nil {
			return createError("secret", p.name, err)
		}
		u.Push(func() { deleteObject(p.cl.c, sec) })
	}
	sb := sandboxObject(p.name, p.cl.ns, labels, pod, p.pol.Limits.Timeout.D(), time.Now())
	if err := p.cl.c.Create(ctx, sb); err != nil {
		return createError("sandbox", p.name, err)
	}
	p.obj = sb
	u.Push(func() { deleteObject(p.cl.c, sb) })
	return nil
}

// claim creates a SandboxClaim against the warm pool. A pool's pods were
// made before the policy was known: one whose template does not give what
// the policy asks is refused, and so is one that needs injected files.
func (b *Backend) claim(ctx context.Context, p *prepared, u *undo.Stack) error {
	want, err := podSpec(podInput{Policy: p.pol, Image: p.image, Caches: p.spec.Caches,
		RuntimeClass: b.cfg.RuntimeClass, NodeAgent: b.cfg.NodeAgent})
	if err != nil {
		return err
	}
	if egress.Needed(p.pol) {
		return fmt.Errorf("warm pool %q: a sandbox with a network or secrets needs the egress CA injected into its pod, which a pool's pod was made without (use no warm pool): %w", b.cfg.WarmPool, sandbox.ErrInvalid)
	}
	if err := b.checkPool(ctx, p.cl, want); err != nil {
		return err
	}
	c := claimObject(p.name, p.cl.ns, b.cfg.WarmPool, b.labels(p.spec.ID), p.pol.Limits.Timeout.D(), time.Now())
	if err := p.cl.c.Create(ctx, c); err != nil {
		return createError("sandboxclaim", p.name, err)
	}
	p.obj = c
	u.Push(func() { deleteClaim(p.cl, c) })
	return nil
}

// createError maps an API error of creating kind/name onto an error kind.
func createError(kind, name string, err error) error {
	switch {
	case apierrors.IsAlreadyExists(err):
		return fmt.Errorf("%s %s: %v: %w", kind, name, err, sandbox.ErrExists)
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return fmt.Errorf("%s %s: %v: %w", kind, name, err, sandbox.ErrInvalid)
	}
	return fmt.Errorf("create %s %s: %v: %w", kind, name, err, sandbox.ErrUnavailable)
}

// connect speaks Hello to the agent and returns the running sandbox.
func (b *Backend) connect(ctx context.Context, p *prepared, u *undo.Stack) (*kubeSandbox, error) {
	pol, spec := p.pol, p.spec
	env := sandbox.Environ(pol, os.Environ(), spec.Env)
	opts, gc := agent.SessionFor(spec, pol, env, p.log, p.sink)
	cl, err := agentbox.Connect(ctx, p.conn, opts, gc, agentbox.Runtime{What: "the pod's attach stream", Died: p.conn.done,
		Left: func() string { return fmt.Sprintf("pod %s: %v: %s", p.pod, p.conn.err, p.tail.String()) }}, u)
	if err != nil {
		return nil, err
	}
	s := &kubeSandbox{b: b, cl: p.cl, obj: p.obj, pod: p.pod, conn: p.conn}
	s.Session = agentbox.NewSession(spec.ID, cl, p.log, p.sink, s.teardown)
	s.SetTimeout(pol.Limits.Timeout.D())
	go s.Watch(nil, p.conn.done)
	p.sink.Emit(audit.Event{Sandbox: spec.ID, Type: audit.TypeStart, Fields: map[string]any{
		"backend": Name, "pod": p.pod, "namespace": p.cl.ns, "image": p.image, "warm_pool": b.cfg.WarmPool,
		"start_ms": time.Since(p.t0).Milliseconds(),
	}})
	return s, nil
}

// deleteObject deletes obj and what it owns (its pod), not waiting.
func deleteObject(c client.Client, obj client.Object) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c.Delete(ctx, obj, client.PropagationPolicy("Foreground"), client.GracePeriodSeconds(0))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %T %s: %w", obj, obj.GetName(), err)
	}
	return nil
}
