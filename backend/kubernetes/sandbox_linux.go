package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/airlock-dev/airlock/agent"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/backend/internal/ending"
	"github.com/airlock-dev/airlock/sandbox"
)

// kubeSandbox is one pod and the agent client talking to it over its
// attach stream.
type kubeSandbox struct {
	id     string
	b      *Backend
	cl     *cluster
	obj    client.Object // the Sandbox or SandboxClaim
	pod    string
	log    *slog.Logger
	audit  audit.Sink
	client *agent.Client
	conn   *attachConn
	timer  atomic.Pointer[time.Timer]

	done     chan struct{}
	teardown sync.Once
	tdErr    error
	cause    ending.Cause // why it ended
}

func metaName(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

func (s *kubeSandbox) ID() string { return s.id }

func (s *kubeSandbox) Done() <-chan struct{} { return s.done }

func (s *kubeSandbox) errClosed(op string) error { return s.cause.Err(s.id, op) }

// Exec starts a process through the agent.
func (s *kubeSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	p, err := s.cause.Exec(ctx, s.id, s.client.Exec, req)
	if err != nil {
		return nil, err
	}
	return &process{Process: p, s: s}, nil
}

// Files is the agent's file API, as the sandbox's user inside the pod.
func (s *kubeSandbox) Files() sandbox.Files { return s.client.Files() }

// Stats reports nothing measured: the pod's cgroup is on its node, out of
// the server's reach (the cluster's metrics pipeline has it).
func (s *kubeSandbox) Stats(ctx context.Context) (sandbox.Stats, error) {
	if s.cause.Closed.Load() {
		return sandbox.Stats{}, s.errClosed("stats")
	}
	return sandbox.Stats{}, nil
}

// DialPort opens a stream to port on the pod's loopback through the
// agent. See sandbox.PortDialer.
func (s *kubeSandbox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if s.cause.Closed.Load() {
		return nil, s.errClosed("dial")
	}
	return s.client.Dial(ctx, port)
}

// Destroy ends the agent and deletes the sandbox's objects; it returns
// once they are gone (foreground deletion: the pod first). Idempotent.
func (s *kubeSandbox) Destroy(ctx context.Context) error {
	s.end("destroyed")
	return s.tdErr
}

// watch ends the sandbox when the attach stream or the session ends (the
// agent died, the pod was deleted or evicted).
func (s *kubeSandbox) watch() {
	select {
	case <-s.client.Done():
	case <-s.conn.done:
	case <-s.done:
		return
	}
	s.end("sandbox exited")
}

func (s *kubeSandbox) timeout() {
	s.cause.TimedOut.Store(true)
	s.audit.Emit(audit.Event{Sandbox: s.id, Type: audit.TypeLimit, Message: "sandbox wall timeout",
		Fields: map[string]any{"limit": "timeout"}})
	s.end("timeout")
}

// end tears the sandbox down once: close the agent channel (the agent
// exits at EOF), delete the Sandbox or claim, the files' Secret, and wait
// until the pod is gone.
func (s *kubeSandbox) end(why string) {
	s.teardown.Do(func() {
		t0 := time.Now()
		s.cause.Closed.Store(true)
		if t := s.timer.Load(); t != nil {
			t.Stop()
		}
		s.client.Close()
		s.conn.Close()
		var err error
		if c, ok := s.obj.(*extv1.SandboxClaim); ok {
			err = deleteClaim(s.cl, c)
		} else {
			err = deleteObject(s.cl.c, s.obj)
		}
		sec := &corev1.Secret{ObjectMeta: metaName(s.cl.ns, s.obj.GetName())}
		err = errors.Join(err, deleteObject(s.cl.c, sec), s.b.waitGone(s.cl, s.pod))
		if err != nil {
			s.tdErr = fmt.Errorf("destroy sandbox %q: %w", s.id, err)
		}
		s.log.Debug("sandbox ended", "why", why, "teardown", time.Since(t0))
		s.audit.Emit(audit.Event{Sandbox: s.id, Type: audit.TypeDestroy, Message: why})
		close(s.done)
	})
}

// process marks a process killed by the sandbox's wall timeout.
type process struct {
	sandbox.Process
	s *kubeSandbox
}

// Wait reports a process the sandbox's timeout killed as killed for that
// reason.
func (p *process) Wait(ctx context.Context) (sandbox.ExitStatus, error) {
	st, err := p.Process.Wait(ctx)
	return p.s.cause.Status(ctx, p.s.done, st, err)
}
