package kubernetes

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/backend/internal/agentbox"
	"github.com/airlock-dev/airlock/sandbox"
)

// kubeSandbox is one pod and the agent session with it over its attach
// stream.
type kubeSandbox struct {
	*agentbox.Session
	b    *Backend
	cl   *cluster
	obj  client.Object // the Sandbox or SandboxClaim
	pod  string
	conn *attachConn
}

func metaName(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

// Exec starts a process through the agent.
func (s *kubeSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	p, err := s.Session.Exec(ctx, req)
	if err != nil {
		return nil, err
	}
	return &agentbox.Process{Process: p, S: s.Session}, nil
}

// Stats reports nothing measured: the pod's cgroup is on its node, out of
// the server's reach (the cluster's metrics pipeline has it).
func (s *kubeSandbox) Stats(ctx context.Context) (sandbox.Stats, error) {
	if s.Closed() {
		return sandbox.Stats{}, s.ClosedErr("stats")
	}
	return sandbox.Stats{}, nil
}

// teardown ends the sandbox (agentbox runs it once; Destroy returns once it
// is done): close the agent channel (the agent exits at EOF), delete the
// Sandbox or claim, the files' Secret, and wait until the pod is gone
// (foreground deletion: the pod first).
func (s *kubeSandbox) teardown(why string) error {
	s.Client.Close()
	s.conn.Close()
	var err error
	if c, ok := s.obj.(*extv1.SandboxClaim); ok {
		err = deleteClaim(s.cl, c)
	} else {
		err = deleteObject(s.cl.c, s.obj)
	}
	sec := &corev1.Secret{ObjectMeta: metaName(s.cl.ns, s.obj.GetName())}
	err = errors.Join(err, deleteObject(s.cl.c, sec), s.b.waitGone(s.cl, s.pod))
	s.Audit.Emit(audit.Event{Sandbox: s.ID(), Type: audit.TypeDestroy, Message: why})
	return err
}
