// Package logtail keeps the end of a child's output for error messages and
// sends it to a logger line by line: what a runtime (runsc, the agent, a
// browser) says on stderr. It never holds more than its bounds.
package logtail

import (
	"bytes"
	"sync"
)

// Tail keeps the last Max bytes written. Safe for concurrent use.
type Tail struct {
	Max int

	mu sync.Mutex
	b  []byte
}

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.Max {
		t.b = t.b[len(t.b)-t.Max:]
	}
	return len(p), nil
}

func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// maxLine bounds a line kept for the logger (a longer one is dropped).
const maxLine = 4096

// Lines writes to Tail (when set) and logs each complete line with Prefix
// at Warn. Safe for concurrent use.
type Lines struct {
	Log    interface{ Warn(string, ...any) }
	Prefix string
	Tail   *Tail

	mu   sync.Mutex
	line []byte
}

func (w *Lines) Write(b []byte) (int, error) {
	if w.Tail != nil {
		w.Tail.Write(b)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.line = append(w.line, b...)
	for {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			break
		}
		w.Log.Warn(w.Prefix + string(w.line[:i]))
		w.line = w.line[i+1:]
	}
	if len(w.line) > maxLine {
		w.line = w.line[:0]
	}
	return len(b), nil
}
