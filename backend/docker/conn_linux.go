package docker

import (
	"io"
	"log/slog"
	"sync"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/airlock-dev/airlock/internal/logtail"
)

// attachConn is the agent channel over the container's attached stdio: the
// host writes the container's stdin on the hijacked connection, and reads
// its stdout out of dockerd's multiplexed stream (stdcopy framing; the
// agent's stderr, its log, goes to the logger). Close ends both, which the
// agent sees as EOF on stdin: it exits, and the container with it.
type attachConn struct {
	hr   types.HijackedResponse
	pr   *io.PipeReader
	once sync.Once
	done chan struct{} // closed when the demultiplexer stopped
}

func newAttachConn(hr types.HijackedResponse, log *slog.Logger, tail *logtail.Tail) *attachConn {
	pr, pw := io.Pipe()
	c := &attachConn{hr: hr, pr: pr, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		_, err := stdcopy.StdCopy(pw, &logtail.Lines{Log: log, Prefix: "agent: ", Tail: tail}, hr.Reader)
		if err == nil {
			err = io.EOF
		}
		pw.CloseWithError(err)
	}()
	return c
}

func (c *attachConn) Read(b []byte) (int, error)  { return c.pr.Read(b) }
func (c *attachConn) Write(b []byte) (int, error) { return c.hr.Conn.Write(b) }

func (c *attachConn) Close() error {
	c.once.Do(func() {
		c.hr.Close()
		c.pr.Close()
	})
	return nil
}
