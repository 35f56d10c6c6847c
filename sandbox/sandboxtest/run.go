package sandboxtest

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-dev/airlock/sandbox"
)

// result is a finished exec.
type result struct {
	status         sandbox.ExitStatus
	stdout, stderr string
}

// run execs the helper with args and waits.
func (bx *box) run(t *testing.T, stdin io.Reader, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	st := bx.exec(t, sandbox.ExecRequest{Args: append([]string{bx.helper}, args...), Stdin: stdin, Stdout: &out, Stderr: &errb})
	return result{status: st, stdout: out.String(), stderr: errb.String()}
}

// exec starts req and waits for it, failing t on any error.
func (bx *box) exec(t *testing.T, req sandbox.ExecRequest) sandbox.ExitStatus {
	t.Helper()
	ctx := ctxT(t)
	p, err := bx.Exec(ctx, req)
	if err != nil {
		t.Fatalf("exec %q in %s: %v", req.Args, bx.ID(), err)
	}
	st, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("wait %q in %s: %v", req.Args, bx.ID(), err)
	}
	return st
}

// argv returns the helper's argv.
func (bx *box) argv(args ...string) []string { return append([]string{bx.helper}, args...) }

// syncBuffer is an output sink that a test can wait on.
type syncBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	cond chan struct{}
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{cond: make(chan struct{})} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	close(b.cond)
	b.cond = make(chan struct{})
	return len(p), nil
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor blocks until the output contains s (or ctx ends).
func (b *syncBuffer) waitFor(ctx context.Context, s string) bool {
	for {
		b.mu.Lock()
		ok := strings.Contains(b.buf.String(), s)
		ch := b.cond
		b.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// patternChecker verifies the helper's "pattern" output (byte i is i%251)
// without keeping it.
type patternChecker struct {
	n       int64
	badAt   int64
	badByte int
}

func (c *patternChecker) Write(p []byte) (int, error) {
	for i, b := range p {
		if c.badAt < 0 && b != byte((c.n+int64(i))%251) {
			c.badAt, c.badByte = c.n+int64(i), int(b)
		}
	}
	c.n += int64(len(p))
	return len(p), nil
}

// waitClosed waits for ch to close.
func waitClosed(ctx context.Context, ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}
