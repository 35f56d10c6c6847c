package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/audit"
)

// eventWriter stores audit events in batches and wakes followers. Emit
// blocks when the queue is full rather than dropping events.
type eventWriter struct {
	store   *Store
	log     *slog.Logger
	metrics *serverMetrics
	q       chan audit.Event
	done    chan struct{}

	mu      sync.Mutex
	notify  chan struct{} // closed and replaced after each stored batch
	closed  bool
	pending int // emitted, not yet stored
	sendMu  sync.RWMutex
}

func newEventWriter(st *Store, log *slog.Logger, m *serverMetrics) *eventWriter {
	w := &eventWriter{store: st, log: log, metrics: m, q: make(chan audit.Event, 4096),
		done: make(chan struct{}), notify: make(chan struct{})}
	go w.run()
	return w
}

func (w *eventWriter) emit(e audit.Event) {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	// sendMu orders sends before close(w.q): no send on a closed channel.
	w.sendMu.RLock()
	defer w.sendMu.RUnlock()
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed {
		w.log.Warn("audit event after shutdown", "sandbox", e.Sandbox, "type", e.Type, "message", e.Message)
		return
	}
	w.mu.Lock()
	w.pending++
	w.mu.Unlock()
	w.q <- e
}

// sink returns the audit sink of sandbox id on backend.
func (w *eventWriter) sink(id, backend string) audit.Sink {
	return sandboxSink{w: w, id: id, backend: backend}
}

type sandboxSink struct {
	w       *eventWriter
	id      string
	backend string
}

func (s sandboxSink) Emit(e audit.Event) {
	// The sandbox ID is the server's, whatever the emitter wrote.
	e.Sandbox = s.id
	if e.Type == audit.TypeViolation {
		s.w.metrics.violations.WithLabelValues(s.backend).Inc()
	}
	s.w.emit(e)
}

// batchWindow is how long the writer gathers events before a commit.
const batchWindow = 5 * time.Millisecond

func (w *eventWriter) run() {
	defer close(w.done)
	for e := range w.q {
		batch := []audit.Event{e}
		// Gather what arrives within a short window into one transaction:
		// an exec makes several events in quick succession, and fewer
		// commits leave the CPU to the sandboxes.
		window := time.NewTimer(batchWindow)
	more:
		for len(batch) < 512 {
			select {
			case e, ok := <-w.q:
				if !ok {
					break more
				}
				batch = append(batch, e)
			case <-window.C:
				break more
			}
		}
		window.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := w.store.AddEvents(ctx, batch); err != nil {
			w.log.Error("store audit events", "count", len(batch), "err", err)
		}
		cancel()
		w.mu.Lock()
		w.pending -= len(batch)
		close(w.notify)
		w.notify = make(chan struct{})
		w.mu.Unlock()
	}
}

// wait returns a channel closed after the next stored batch.
func (w *eventWriter) wait() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.notify
}

// flush waits until every event emitted so far is stored.
func (w *eventWriter) flush() {
	for {
		w.mu.Lock()
		n, wake := w.pending, w.notify
		w.mu.Unlock()
		if n <= 0 {
			return
		}
		<-wake
	}
}

func (w *eventWriter) close() {
	w.sendMu.Lock()
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		w.sendMu.Unlock()
		return
	}
	w.closed = true
	w.mu.Unlock()
	close(w.q)
	w.sendMu.Unlock()
	<-w.done
}

func toAPIEvents(evs []StoredEvent) []api.Event {
	out := make([]api.Event, 0, len(evs))
	for _, e := range evs {
		out = append(out, api.Event{Seq: e.Seq, Time: e.Time, Sandbox: e.Sandbox, Type: e.Type, Message: e.Message, Fields: e.Fields})
	}
	return out
}

// handleEvents lists a sandbox's audit events (after=SEQ), or follows them
// as NDJSON (follow=true) or SSE (Accept: text/event-stream).
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	rec := s.stored(w, r)
	if rec == nil {
		return
	}
	id := rec.ID
	q := r.URL.Query()
	var after int64
	if v := q.Get("after"); v != "" {
		var err error
		if after, err = strconv.ParseInt(v, 10, 64); err != nil || after < 0 {
			s.writeError(w, r, errBadRequest("after %q: want a sequence number", v))
			return
		}
	}
	sse := acceptsSSE(r)
	follow := q.Get("follow") == "true" || sse
	if !follow {
		s.events.flush()
		evs, err := s.store.Events(r.Context(), id, after, 10000)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, api.EventList{Events: toAPIEvents(evs)})
		return
	}
	st := newStreamWriter(w, sse)
	st.start()
	for {
		wake := s.events.wait()
		if rec.State == StateStopped {
			// The last pass: what the sandbox emitted may still be in the
			// writer's buffer (a follow that starts after the destroy).
			s.events.flush()
		}
		evs, err := s.store.Events(r.Context(), id, after, 1000)
		if err != nil {
			return
		}
		for _, e := range toAPIEvents(evs) {
			if st.send("event", e) != nil {
				return
			}
			after = e.Seq
		}
		if len(evs) == 1000 {
			continue
		}
		if rec.State == StateStopped {
			return
		}
		l := s.liveByID(id)
		if l == nil {
			// Ended while we read: one more pass picks up the destroy event.
			rec.State = StateStopped
			continue
		}
		select {
		case <-wake:
		case <-l.gone:
		case <-r.Context().Done():
			return
		}
	}
}

// streamWriter writes NDJSON lines or SSE events, flushing each.
type streamWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	sse bool
	mu  sync.Mutex
}

func newStreamWriter(w http.ResponseWriter, sse bool) *streamWriter {
	return &streamWriter{w: w, rc: http.NewResponseController(w), sse: sse}
}

func (s *streamWriter) start() {
	if s.sse {
		s.w.Header().Set("Content-Type", "text/event-stream")
	} else {
		s.w.Header().Set("Content-Type", "application/x-ndjson")
	}
	s.w.Header().Set("Cache-Control", "no-store")
	s.w.WriteHeader(http.StatusOK)
	s.rc.Flush()
}

func (s *streamWriter) send(event string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sse {
		_, err = fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, b)
	} else {
		b = append(b, '\n')
		_, err = s.w.Write(b)
	}
	if err != nil {
		return err
	}
	return s.rc.Flush()
}

func acceptsSSE(r *http.Request) bool {
	return r.Header.Get("Accept") == "text/event-stream"
}
