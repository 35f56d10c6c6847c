package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
)

// maxDenialList bounds the refusals `run` keeps for its summary and --json.
const maxDenialList = 100

// denialLog collects the writes a protection rule refused during a run, for
// the summary on stderr at exit and the --json list; with live set it also
// says so on stderr the first time each one happens, so that an agent
// reading its command's error output learns it was airlock, which rule, and
// how to allow it.
type denialLog struct {
	Next audit.Sink
	live io.Writer // nil: no live notices (stderr is a terminal the agent draws on)

	mu    sync.Mutex
	list  []policy.Denial
	seen  map[policy.Denial]bool
	total int
	// requests are the HTTP requests the egress proxy's request rules
	// refused (distinct, at most maxDenialList), reqTotal all of them.
	requests []string
	reqSeen  map[string]bool
	reqTotal int
	// egress are the refused destinations (distinct, bounded), with why.
	egress      []egressRefusal
	egressSeen  map[string]bool
	egressTotal int
}

// egressRefusal is one destination the egress proxy refused.
type egressRefusal struct{ dest, reason string }

func newDenialLog(next audit.Sink, live io.Writer) *denialLog {
	return &denialLog{Next: next, live: live, seen: map[policy.Denial]bool{}, reqSeen: map[string]bool{}, egressSeen: map[string]bool{}}
}

// Emit records denied events and forwards every event.
func (d *denialLog) Emit(e audit.Event) {
	if e.Type == audit.TypeDenied {
		x := policy.Denial{Rule: str(e.Fields["rule"]), Op: str(e.Fields["op"]), Path: str(e.Fields["path"])}
		d.mu.Lock()
		d.total++
		first := !d.seen[x]
		if first && len(d.list) < maxDenialList {
			d.seen[x] = true
			d.list = append(d.list, x)
		}
		d.mu.Unlock()
		if first && d.live != nil {
			fmt.Fprintf(d.live, "airlock: refused %s %s: %s\n", x.Op, x.Path, ruleAdvice(x.Rule))
		}
	}
	if e.Type == audit.TypeEgress && e.Fields["request"] == true && e.Fields["action"] == "deny" {
		d.noteRequest(e)
	}
	if dest, reason, ok := egressDenied(e); ok {
		d.mu.Lock()
		d.egressTotal++
		first := !d.egressSeen[dest+"\x00"+reason]
		if first && len(d.egress) < maxDenialList {
			d.egressSeen[dest+"\x00"+reason] = true
			d.egress = append(d.egress, egressRefusal{dest, reason})
		}
		d.mu.Unlock()
		if first && d.live != nil {
			fmt.Fprintf(d.live, "airlock: refused egress to %s: %s%s\n", dest, reason, egressAdvice(dest, reason))
		}
	}
	if d.Next != nil {
		d.Next.Emit(e)
	}
}

// noteRequest keeps a refused HTTP request for the summary.
func (d *denialLog) noteRequest(e audit.Event) {
	line := fmt.Sprintf("%s %s%s: %s", str(e.Fields["method"]), str(e.Fields["host"]), str(e.Fields["path"]), str(e.Fields["reason"]))
	if hint := str(e.Fields["allow_with"]); hint != "" {
		line += " (to allow: " + hint + ")"
	}
	d.mu.Lock()
	d.reqTotal++
	first := !d.reqSeen[line]
	if first && len(d.requests) < maxDenialList {
		d.reqSeen[line] = true
		d.requests = append(d.requests, line)
	}
	d.mu.Unlock()
	if first && d.live != nil {
		fmt.Fprintf(d.live, "airlock: refused request %s\n", line)
	}
}

// egressDenied reads a refused connection out of an egress event.
func egressDenied(e audit.Event) (dest, reason string, ok bool) {
	if e.Type != audit.TypeEgress || !strings.HasPrefix(e.Message, "egress denied ") {
		return "", "", false
	}
	dest, reason, _ = strings.Cut(strings.TrimPrefix(e.Message, "egress denied "), ": ")
	return dest, reason, true
}

// egressAdvice is the flag that would allow a refused destination, when a
// flag can (a guarded address range is not opened by an allow entry).
func egressAdvice(dest, reason string) string {
	if strings.Contains(reason, "allow") && !strings.HasPrefix(dest, ":") {
		return "; to allow: --allow " + dest + " (network.allow)"
	}
	return ""
}

// egressSummary is the refused-egress paragraph of the exit summary.
func (d *denialLog) egressSummary() string {
	d.mu.Lock()
	list, total := append([]egressRefusal(nil), d.egress...), d.egressTotal
	d.mu.Unlock()
	if total == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "airlock: refused %d outbound connection(s):\n", total)
	for _, x := range list {
		fmt.Fprintf(&b, "  %s: %s%s\n", x.dest, x.reason, egressAdvice(x.dest, x.reason))
	}
	if more := total - len(list); more > 0 {
		fmt.Fprintf(&b, "  ... %d more (repeats or beyond the first %d; see --audit)\n", more, maxDenialList)
	}
	return b.String()
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// Denials returns the distinct refusals kept and how many there were.
func (d *denialLog) Denials() ([]policy.Denial, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]policy.Denial(nil), d.list...), d.total
}

// ruleAdvice says why a rule exists and how to allow what it refused.
func ruleAdvice(rule string) string {
	why := policy.GuardRuleWhy(rule)
	switch rule {
	case policy.RuleSetID:
		return rule + " rule (" + why + "); cannot be allowed"
	case policy.RulePinned:
		return rule + " rule (" + why + "); move the file out of the sandbox's writable paths to change it"
	case "":
		return "refused by a protection rule"
	}
	return rule + " rule (" + why + "); to allow: --writable-config DIR (filesystem.writable_config) for a directory you trust, or filesystem.protect_config: false"
}

// summary is the paragraph `run` prints on stderr at exit.
func (d *denialLog) summary() string {
	return d.writeSummary() + d.requestSummary()
}

// requestSummary lists the HTTP requests request rules refused.
func (d *denialLog) requestSummary() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.reqTotal == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "airlock: refused %d HTTP request(s) by egress request rules:\n", d.reqTotal)
	for _, l := range d.requests {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	return b.String()
}

// writeSummary is the paragraph on refused writes.
func (d *denialLog) writeSummary() string {
	list, total := d.Denials()
	if total == 0 {
		return d.egressSummary()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "airlock: refused %d write(s) that could make programs outside the sandbox run code later or widen its next run:\n", total)
	rules := map[string]bool{}
	for _, x := range list {
		fmt.Fprintf(&b, "  %-16s %s  [%s]\n", x.Op, x.Path, x.Rule)
		rules[x.Rule] = true
	}
	if more := total - len(list); more > 0 {
		fmt.Fprintf(&b, "  ... %d more (repeats or beyond the first %d; see --audit)\n", more, maxDenialList)
	}
	names := make([]string, 0, len(rules))
	for r := range rules {
		names = append(names, r)
	}
	sort.Strings(names)
	for _, r := range names {
		fmt.Fprintf(&b, "  %s\n", ruleAdvice(r))
	}
	return b.String() + d.egressSummary()
}
