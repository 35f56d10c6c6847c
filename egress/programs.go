package egress

import (
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// namesPrograms reports whether a rule or bound of c names programs: only
// then must the agent inside name the program behind each connection.
func (c *compiled) namesPrograms() bool {
	for _, list := range [][]*policy.CompiledRule{c.req.Rules, c.req.Bounds} {
		for _, r := range list {
			if len(r.Rule.Programs) > 0 {
				return true
			}
		}
	}
	return false
}

// WatchPrograms implements sandbox.ProgramRules: SetNetwork calls fn when
// its rules come to name programs (before they take effect) or stop (after).
func (p *Proxy) WatchPrograms(fn func(names bool)) (bool, func()) {
	p.watchMu.Lock()
	defer p.watchMu.Unlock()
	if p.watchers == nil {
		p.watchers = map[int]func(bool){}
	}
	p.watchSeq++
	id := p.watchSeq
	p.watchers[id] = fn
	return p.programs, func() {
		p.watchMu.Lock()
		delete(p.watchers, id)
		p.watchMu.Unlock()
	}
}

// tellPrograms records whether rules name programs and, on a change, tells
// every watcher. The caller holds watchMu.
func (p *Proxy) tellPrograms(names bool) {
	if names == p.programs {
		return
	}
	p.programs = names
	for _, fn := range p.watchers {
		fn(names)
	}
}

var _ sandbox.ProgramRules = (*Proxy)(nil)
