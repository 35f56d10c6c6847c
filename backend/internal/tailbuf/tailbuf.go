// Package tailbuf keeps the last bytes a helper process wrote (runsc's,
// QEMU's stderr), for error messages: bounded, safe for concurrent use.
package tailbuf

import "sync"

// Buffer keeps the last Max bytes written.
type Buffer struct {
	Max int
	mu  sync.Mutex
	b   []byte
}

// New returns a Buffer keeping max bytes.
func New(max int) *Buffer { return &Buffer{Max: max} }

func (t *Buffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.Max {
		t.b = t.b[len(t.b)-t.Max:]
	}
	return len(p), nil
}

func (t *Buffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
