package docker

import (
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/pkg/stdcopy"
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

func newAttachConn(hr types.HijackedResponse, log *slog.Logger, tail *tailBuffer) *attachConn {
	pr, pw := io.Pipe()
	c := &attachConn{hr: hr, pr: pr, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		_, err := stdcopy.StdCopy(pw, &logWriter{log: log, tail: tail}, hr.Reader)
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

// logWriter sends the agent's stderr to the log line by line and keeps its
// tail for error messages.
type logWriter struct {
	log  *slog.Logger
	tail *tailBuffer
	mu   sync.Mutex
	line []byte
}

func (w *logWriter) Write(b []byte) (int, error) {
	w.tail.Write(b)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.line = append(w.line, b...)
	for {
		i := strings.IndexByte(string(w.line), '\n')
		if i < 0 {
			break
		}
		w.log.Warn("agent: " + string(w.line[:i]))
		w.line = w.line[i+1:]
	}
	if len(w.line) > 4096 {
		w.line = w.line[:0]
	}
	return len(b), nil
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
