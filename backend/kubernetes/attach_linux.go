package kubernetes

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/airlock-dev/airlock/internal/logtail"
	"github.com/airlock-dev/airlock/sandbox"
)

// attachLinger is how long Close waits for the stream to end by itself.
const attachLinger = 5 * time.Second

// attachConn is the agent channel over the pod's attach (pods/attach, the
// container's stdin and stdout; its stderr, the agent's log, goes to the
// logger). Close ends the host's stdin, which the agent sees as EOF
// (stdinOnce: the kubelet closes the container's stdin for good): it
// exits, and the container with it.
type attachConn struct {
	inW    *io.PipeWriter
	outR   *io.PipeReader
	cancel context.CancelFunc
	once   sync.Once
	done   chan struct{} // closed when the stream ended; err is then set
	err    error
}

// attachURL is the pods/attach request of the agent container of pod.
func attachURL(cfg *rest.Config, ns, pod string) (*url.URL, error) {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		return nil, err
	}
	c := rest.CopyConfig(cfg)
	c.APIPath = "/api"
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.NegotiatedSerializer = serializer.NewCodecFactory(s).WithoutConversion()
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	opts := &corev1.PodAttachOptions{Container: ContainerName, Stdin: true, Stdout: true, Stderr: true}
	return rc.Post().Namespace(ns).Resource("pods").Name(pod).SubResource("attach").
		VersionedParams(opts, runtime.NewParameterCodec(s)).URL(), nil
}

// attach opens the attach stream of pod's agent container: over a
// WebSocket, or SPDY where a proxy or an older API server refuses the
// upgrade (as kubectl does).
func attach(cfg *rest.Config, ns, pod string, log *slog.Logger, tail *logtail.Tail) (*attachConn, error) {
	u, err := attachURL(cfg, ns, pod)
	if err != nil {
		return nil, fmt.Errorf("attach %s: %v: %w", pod, err, sandbox.ErrUnavailable)
	}
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
	if err != nil {
		return nil, fmt.Errorf("attach %s: %v: %w", pod, err, sandbox.ErrUnavailable)
	}
	ex := ws
	if sp, err := remotecommand.NewSPDYExecutor(cfg, "POST", u); err == nil {
		if fb, err := remotecommand.NewFallbackExecutor(ws, sp, func(err error) bool {
			return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		}); err == nil {
			ex = fb
		}
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	c := &attachConn{inW: inW, outR: outR, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{
			Stdin: inR, Stdout: outW, Stderr: &logtail.Lines{Log: log, Prefix: "agent: ", Tail: tail},
		})
		if err == nil {
			err = io.EOF
		}
		c.err = err
		outW.CloseWithError(err)
		inR.CloseWithError(err)
	}()
	return c, nil
}

func (c *attachConn) Read(b []byte) (int, error)  { return c.outR.Read(b) }
func (c *attachConn) Write(b []byte) (int, error) { return c.inW.Write(b) }

// Close ends the stream: EOF on the agent's stdin, then the connection.
func (c *attachConn) Close() error {
	c.once.Do(func() {
		c.inW.Close()
		c.outR.Close()
		go func() {
			// The agent exits at EOF and the stream ends with it; a
			// stream that does not end is cut.
			select {
			case <-c.done:
			case <-time.After(attachLinger):
			}
			c.cancel()
		}()
	})
	return nil
}
