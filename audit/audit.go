// Package audit defines Airlock's structured events and the sinks that
// record them. Every decision that matters (exec, file writes through the
// API, egress allowed or denied, violations, limit hits) becomes an Event.
// A sink must never block a sandbox for long or drop events silently: a sink
// that fails reports the error to its caller.
package audit

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// Event types.
const (
	TypeStart     = "start"
	TypeExec      = "exec"
	TypeExit      = "exit"
	TypeViolation = "violation"
	// TypeDenied is a file operation a protection rule refused (fields:
	// rule, path, op, pid); see policy.GuardRules.
	TypeDenied   = "denied"
	TypeLimit    = "limit"
	TypeFile     = "file"
	TypeEgress   = "egress"
	TypePolicy   = "policy"   // policy changed from outside
	TypeDegraded = "degraded" // a protection was explicitly waived
	TypeDestroy  = "destroy"
)

// Event is one audit record, written as one JSON line.
type Event struct {
	Time    time.Time      `json:"time"`
	Sandbox string         `json:"sandbox"`
	Type    string         `json:"type"`
	Message string         `json:"message,omitempty"`
	Fields  map[string]any `json:"fields,omitempty"`
}

// Sink receives events. Implementations are safe for concurrent use.
type Sink interface {
	Emit(e Event)
}

// Discard drops every event.
var Discard Sink = discard{}

type discard struct{}

func (discard) Emit(Event) {}

// JSONLines writes each event as one JSON line to w.
type JSONLines struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

// NewJSONLines returns a sink writing to w.
func NewJSONLines(w io.Writer) *JSONLines { return &JSONLines{w: w} }

// Emit writes e; the first write error is kept and returned by Err.
func (j *JSONLines) Emit(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	b = append(b, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err == nil {
		_, j.err = j.w.Write(b)
	}
}

// Err returns the first write error.
func (j *JSONLines) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// Multi fans events out to several sinks.
type Multi []Sink

// Emit sends e to every sink.
func (m Multi) Emit(e Event) {
	for _, s := range m {
		if s != nil {
			s.Emit(e)
		}
	}
}

// Counter counts events by type and forwards them; used for violation
// counts in run --json.
type Counter struct {
	Next Sink
	mu   sync.Mutex
	n    map[string]int
}

// Emit counts e and forwards it.
func (c *Counter) Emit(e Event) {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[e.Type]++
	c.mu.Unlock()
	if c.Next != nil {
		c.Next.Emit(e)
	}
}

// Count returns how many events of type t were seen.
func (c *Counter) Count(t string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[t]
}
