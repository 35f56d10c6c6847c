package agent

import (
	"context"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

// programsTimeout bounds telling the guest whether to name programs. Past
// it the policy change goes ahead without: a connection the guest did not
// name matches no rule naming programs (refused, never let through).
const programsTimeout = 10 * time.Second

// watchPrograms, when the guest will listen for egress and the egress
// handler's rules may name programs, sets cfg.SkipPrograms from whether
// they name any now and follows the handler's changes (tellPrograms) until
// the session ends. Called by Hello before it sends cfg.
func (c *Client) watchPrograms(cfg *GuestConfig) {
	w, ok := c.opts.Egress.(sandbox.ProgramRules)
	if !ok || cfg.EgressAddr == "" {
		return
	}
	c.mu.Lock()
	watching := c.stopPrograms != nil
	c.mu.Unlock()
	if watching {
		return // a second Hello, which the guest refuses
	}
	now, stop := w.WatchPrograms(c.tellPrograms)
	cfg.SkipPrograms = !now
	c.mu.Lock()
	c.stopPrograms = stop
	ended := c.ctx.Err() != nil
	c.mu.Unlock()
	if ended {
		c.endWatch()
	}
}

// endWatch stops following the egress handler (the session is gone).
func (c *Client) endWatch() {
	c.mu.Lock()
	stop := c.stopPrograms
	c.stopPrograms = func() {}
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// tellPrograms tells the guest whether to name the program behind each
// egress connection from now on, and waits for it to have taken note (a
// request pipelined behind Hello waits for Hello). Called by the egress
// handler while it changes its policy.
func (c *Client) tellPrograms(names bool) {
	ctx, cancel := context.WithTimeout(c.ctx, programsTimeout)
	defer cancel()
	st, _, err := c.roundTrip(ctx, "agent programs", &request{Op: opPrograms, Identify: names})
	if err != nil {
		c.log.Warn("cannot tell the agent whether to name programs", "names", names, "err", err)
		return
	}
	st.Close()
	c.log.Debug("agent told whether to name programs", "names", names)
}
