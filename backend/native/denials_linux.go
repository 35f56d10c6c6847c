package native

import (
	"log/slog"
	"sync"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
)

// maxDenialEvents bounds the distinct refusals one sandbox reports as
// events; past it they are only counted (a loop of refused writes must not
// flood the audit store).
const maxDenialEvents = 256

// denials reports the write mediator's refusals: one audit event for the
// first of each distinct (rule, op, path); repeats and refusals past the
// bound are counted, and the sandbox's destroy event says how many.
type denials struct {
	sink audit.Sink
	id   string
	log  *slog.Logger

	mu    sync.Mutex
	seen  map[policy.Denial]int
	total int
}

func newDenials(sink audit.Sink, id string, log *slog.Logger) *denials {
	return &denials{sink: sink, id: id, log: log, seen: map[policy.Denial]int{}}
}

func (d *denials) report(x policy.Denial, tid uint32) {
	d.mu.Lock()
	d.total++
	n, ok := d.seen[x]
	emit := !ok && len(d.seen) < maxDenialEvents
	if ok || emit {
		d.seen[x] = n + 1
	}
	d.mu.Unlock()
	if !emit {
		return
	}
	d.log.Info("write refused", "rule", x.Rule, "op", x.Op, "path", x.Path, "host_pid", tid)
	d.sink.Emit(audit.Event{Sandbox: d.id, Type: audit.TypeDenied,
		Message: x.Op + " " + x.Path + ": refused by rule " + x.Rule,
		Fields:  map[string]any{"rule": x.Rule, "op": x.Op, "path": x.Path, "host_pid": tid}})
}

// count returns how many refusals there were, and how many were not
// reported as events of their own.
func (d *denials) count() (total, unreported int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	reported := 0
	for range d.seen {
		reported++
	}
	return d.total, d.total - reported
}
