package egress

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
)

// budget is one network.budgets entry with what was spent against it.
// Counters live as long as the policy they came with.
type budget struct {
	entry   policy.NetworkEntry
	bytesUp int64
	rpm     int

	sent atomic.Int64

	mu     sync.Mutex
	window time.Time
	count  int
}

var errBudget = errors.New("egress budget exceeded")

func compileBudgets(list []policy.Budget) ([]*budget, error) {
	var out []*budget
	for _, b := range list {
		e, err := policy.ParseNetworkEntry(b.Host)
		if err != nil {
			return nil, fmt.Errorf("budget: %w", err)
		}
		out = append(out, &budget{entry: e, bytesUp: int64(b.BytesUp), rpm: b.RequestsPerMinute})
	}
	return out, nil
}

// budgetFor returns the first budget whose host matches h:port.
func (c *compiled) budgetFor(h policy.Host, port uint16) *budget {
	for _, b := range c.budgets {
		if b.entry.Match(h, int(port)) {
			return b
		}
	}
	return nil
}

// spend counts one request (or connection) against h's per-minute budget
// and returns why it is refused, "" when within it.
func (b *budget) spend(now time.Time) string {
	if b == nil || b.rpm <= 0 {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.window) >= time.Minute {
		b.window, b.count = now, 0
	}
	if b.count >= b.rpm {
		return fmt.Sprintf("budget: more than %d requests per minute to %s", b.rpm, b.entry.String())
	}
	b.count++
	return ""
}

// spendRequest is spend for the budget of h:port under the current policy.
func (p *Proxy) spendRequest(h policy.Host, port uint16) string {
	return p.policy().budgetFor(h, port).spend(time.Now())
}

// spendBytes reserves n bytes up; it returns why they are refused.
func (b *budget) spendBytes(n int) string {
	if b == nil || b.bytesUp <= 0 {
		return ""
	}
	if b.sent.Add(int64(n)) > b.bytesUp {
		b.sent.Add(-int64(n))
		return fmt.Sprintf("budget: more than %d bytes sent to %s", b.bytesUp, b.entry.String())
	}
	return ""
}

// overBudget records a refusal by a byte budget (once per attempt).
func (p *Proxy) overBudget(a *attempt, why string) {
	a.mu.Lock()
	first := a.cutWhy == ""
	if first {
		a.cutWhy = why
	}
	a.mu.Unlock()
	if !first {
		return
	}
	p.denied.Add(1)
	p.audit.Emit(audit.Event{Time: time.Now().UTC(), Sandbox: p.id, Type: audit.TypeEgress,
		Message: "egress denied " + a.host.String() + ": " + why,
		Fields:  map[string]any{"action": "deny", "proto": a.proto, "host": a.host.String(), "port": int(a.port), "reason": why, "budget": true}})
	p.log.Info("egress budget exceeded", "host", a.host.String(), "why", why)
}
