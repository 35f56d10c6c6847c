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
	"github.com/airlock-dev/airlock/server/store"
)

// eventWriter stores audit events in batches and wakes followers. Emit
// blocks when the queue is full rather than dropping events.
type eventWriter struct {
	store   *store.Store
	log     *slog.Logger
	metrics *serverMetrics
	q       chan audit.Event
	done    chan struct{}

	// clock is the sinks' time: their rate and the aggregate's second
	// (the real one; tests step a fake).
	clock clock

	mu      sync.Mutex
	notify  chan struct{} // closed and replaced after each stored batch
	closed  bool
	pending int // emitted, not yet stored
	sendMu  sync.RWMutex
}

// clock is what the event sinks need of time.
type clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) interface{ Stop() bool }
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) interface{ Stop() bool } {
	return time.AfterFunc(d, f)
}

func newEventWriter(st *store.Store, log *slog.Logger, m *serverMetrics) *eventWriter {
	w := &eventWriter{store: st, log: log, metrics: m, q: make(chan audit.Event, 4096),
		done: make(chan struct{}), notify: make(chan struct{}), clock: realClock{}}
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

// sink returns the audit sink of sandbox id on backend, which stores at
// most rate events a second (see sandboxSink).
func (w *eventWriter) sink(id, backend string, rate int) audit.Sink {
	return &sandboxSink{w: w, id: id, backend: backend, rate: rate, tokens: float64(rate), last: w.clock.Now()}
}

// sandboxSink is one sandbox's audit sink. Beyond rate events a second
// (a burst of one second's worth allowed) events are not stored one by
// one: each second, one event per type and message says how many more
// like it there were ("N more like this"), for the first heldKinds
// messages; events of further messages are counted per type in one
// summary each ("N more of type T"), and types beyond heldKinds in one
// last summary. So what a sandbox adds each second is bounded by
// rate + 2*heldKinds + 1 rows whatever its messages say (a path or an
// errno that differs each time), while every event is counted. Lifecycle
// events are never held back.
type sandboxSink struct {
	w       *eventWriter
	id      string
	backend string
	rate    int

	mu      sync.Mutex
	tokens  float64
	last    time.Time
	held    map[[2]string]*heldEvents // (type, message) -> count beyond the rate
	kinds   map[string]*heldEvents    // type -> count of messages beyond heldKinds
	others  *heldEvents               // types beyond heldKinds
	flusher interface{ Stop() bool }
}

// heldKinds is how many distinct messages, and then how many types, a
// sandbox's aggregates keep apart each second.
const heldKinds = 16

type heldEvents struct {
	first audit.Event
	n     int
}

func (s *sandboxSink) Emit(e audit.Event) {
	// The sandbox ID is the server's, whatever the emitter wrote.
	e.Sandbox = s.id
	if e.Type == audit.TypeViolation {
		s.w.metrics.violations.WithLabelValues(s.backend).Inc()
	}
	if e.Type != audit.TypeStart && e.Type != audit.TypeDestroy && !s.allow(e) {
		return
	}
	s.w.emit(e)
}

// allow takes a token for e, or holds e back for the next aggregate.
func (s *sandboxSink) allow(e audit.Event) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.w.clock.Now()
	s.tokens = min(float64(s.rate), s.tokens+now.Sub(s.last).Seconds()*float64(s.rate))
	s.last = now
	if s.tokens >= 1 && len(s.held) == 0 {
		s.tokens--
		return true
	}
	if s.held == nil {
		s.held = map[[2]string]*heldEvents{}
	}
	s.hold(e)
	s.w.metrics.eventsDropped.WithLabelValues(e.Type).Inc()
	if s.flusher == nil {
		s.flusher = s.w.clock.AfterFunc(time.Second, s.flush)
	}
	return false
}

// hold counts e in the aggregate of its message, of its type, or of the
// other types: the first that has room (s.mu held).
func (s *sandboxSink) hold(e audit.Event) {
	k := [2]string{e.Type, e.Message}
	if h := s.held[k]; h != nil {
		h.n++
		return
	}
	if len(s.held) < heldKinds {
		s.held[k] = &heldEvents{first: e, n: 1}
		return
	}
	if s.kinds == nil {
		s.kinds = map[string]*heldEvents{}
	}
	if h := s.kinds[e.Type]; h != nil {
		h.n++
		return
	}
	if len(s.kinds) < heldKinds {
		s.kinds[e.Type] = &heldEvents{first: e, n: 1}
		return
	}
	if s.others == nil {
		s.others = &heldEvents{first: e}
	}
	s.others.n++
}

// flush stores one aggregate per held (type, message), one summary per
// type of the messages beyond those, and one for the types beyond.
func (s *sandboxSink) flush() {
	s.mu.Lock()
	held, kinds, others := s.held, s.kinds, s.others
	s.held, s.kinds, s.others, s.flusher = nil, nil, nil, nil
	s.mu.Unlock()
	for _, h := range held {
		s.emitAggregate(h, fmt.Sprintf("%d more like this (over %d events a second): %s", h.n, s.rate, h.first.Message), true)
	}
	for typ, h := range kinds {
		s.emitAggregate(h, fmt.Sprintf("%d more %s events (over %d events a second and %d messages): the first said: %s",
			h.n, typ, s.rate, heldKinds, h.first.Message), false)
	}
	if others != nil {
		s.emitAggregate(others, fmt.Sprintf("%d more events of other types (over %d events a second and %d types): the first was %s: %s",
			others.n, s.rate, heldKinds, others.first.Type, others.first.Message), false)
	}
}

// emitAggregate stores h as one event saying msg. An aggregate of one
// message keeps the first event's fields; a summary of many keeps none
// (they describe only the first) but names the first's message.
func (s *sandboxSink) emitAggregate(h *heldEvents, msg string, sameMessage bool) {
	e := h.first
	e.Time = s.w.clock.Now().UTC()
	fields := map[string]any{"aggregated": h.n, "first_at": h.first.Time}
	if sameMessage {
		for k, v := range h.first.Fields {
			if _, ok := fields[k]; !ok {
				fields[k] = v
			}
		}
	} else {
		fields["first_message"] = h.first.Message
	}
	e.Fields = fields
	e.Message = msg
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
		w.store1(batch)
		w.mu.Lock()
		w.pending -= len(batch)
		close(w.notify)
		w.notify = make(chan struct{})
		w.mu.Unlock()
	}
}

// store1 stores batch, retrying while the store fails (a full disk):
// audit events are never dropped while the server runs. Meanwhile the
// queue fills and emitters wait, which slows the sandboxes making them;
// the storage guard refuses new work before it comes to that.
func (w *eventWriter) store1(batch []audit.Event) {
	backoff := 50 * time.Millisecond
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := w.store.AddEvents(ctx, batch)
		cancel()
		if err == nil {
			return
		}
		w.mu.Lock()
		closed := w.closed
		w.mu.Unlock()
		if closed && try >= 3 {
			// Shutting down and the store still refuses: the log is the
			// last record of them.
			for _, e := range batch {
				w.log.Error("audit event not stored", "sandbox", e.Sandbox, "type", e.Type, "message", e.Message, "fields", e.Fields, "err", err)
			}
			return
		}
		w.log.Error("store audit events; retrying", "count", len(batch), "try", try, "err", err)
		time.Sleep(backoff)
		backoff = min(backoff*2, 5*time.Second)
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

func toAPIEvents(evs []store.StoredEvent) []api.Event {
	out := make([]api.Event, 0, len(evs))
	for _, e := range evs {
		out = append(out, api.Event{Seq: e.Seq, Time: e.Time, Sandbox: e.Sandbox, Type: e.Type, Message: e.Message, Fields: e.Fields})
	}
	return out
}

// handleEvents lists a sandbox's audit events (after=SEQ), or follows them
// as NDJSON (follow=true) or SSE (Accept: text/event-stream). A follow
// ends when the sandbox ends or is paused; it goes on across a rollback,
// whose processes restart in the same sandbox.
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
		if rec.State == store.StateStopped {
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
		if rec.State == store.StateStopped {
			return
		}
		l := s.liveByID(id)
		if l == nil && s.changes.what(id) == changeRollback {
			// Between two lives of a rollback: the stream goes on with the
			// life it leaves, if any. A pause (and the resume after it)
			// ends the stream, even when the resume comes at once.
			if s.changes.wait(r.Context(), id) != nil {
				return
			}
			continue
		}
		if l == nil {
			// Ended (or paused) while we read: one more pass picks up the
			// destroy event.
			rec.State = store.StateStopped
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
