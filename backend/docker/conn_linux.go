package docker

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/airlock-dev/airlock/internal/logtail"
)

// attachConn is the agent channel over the container's attached stdio: the
// host writes the container's stdin on the hijacked connection, and reads
// its stdout out of dockerd's multiplexed stream (the agent's stderr, its
// log, goes to the logger). Close ends both, which the agent sees as EOF on
// stdin: it exits, and the container with it.
type attachConn struct {
	hr   *hijacked
	pr   *io.PipeReader
	once sync.Once
	done chan struct{} // closed when the demultiplexer stopped
}

func newAttachConn(hr *hijacked, log *slog.Logger, tail *logtail.Tail) *attachConn {
	pr, pw := io.Pipe()
	c := &attachConn{hr: hr, pr: pr, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		err := demux(pw, &logtail.Lines{Log: log, Prefix: "agent: ", Tail: tail}, hr)
		if err == nil {
			err = io.EOF
		}
		pw.CloseWithError(err)
	}()
	return c
}

// demux splits dockerd's multiplexed attach stream: frames of an 8-byte
// header (stream 1 stdout or 2 stderr, three zero bytes, a big-endian
// length) and that many bytes. It returns nil at the stream's clean end.
func demux(stdout, stderr io.Writer, r io.Reader) error {
	var h [8]byte
	for {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		n := int64(binary.BigEndian.Uint32(h[4:]))
		var w io.Writer
		switch h[0] {
		case 0, 1: // 0 is stdin, echoed only with a TTY: never here
			w = stdout
		case 2:
			w = stderr
		default:
			return fmt.Errorf("attach stream: frame of unknown stream %d", h[0])
		}
		if _, err := io.CopyN(w, r, n); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
}

func (c *attachConn) Read(b []byte) (int, error)  { return c.pr.Read(b) }
func (c *attachConn) Write(b []byte) (int, error) { return c.hr.Write(b) }

func (c *attachConn) Close() error {
	c.once.Do(func() {
		c.hr.Close()
		c.pr.Close()
	})
	return nil
}
