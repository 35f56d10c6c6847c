package egress

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// compiled is a parsed policy.Network: the entries as policy's one parser
// reads them (policy.ParseNetworkEntry), matched against targets that
// policy.NormalizeHost read.
type compiled struct {
	mode    string
	allow   []policy.NetworkEntry
	deny    []policy.NetworkEntry
	raw     policy.Network
	req     *policy.Requests
	budgets []*budget
}

func compileNetwork(n policy.Network) (*compiled, error) {
	c := &compiled{mode: n.Mode, raw: n}
	switch n.Mode {
	case policy.NetworkNone, policy.NetworkAllowlist, policy.NetworkOpen:
	case "":
		// An unset mode is the safest one.
		c.mode = policy.NetworkNone
	default:
		return nil, fmt.Errorf("network mode %q: %w", n.Mode, sandbox.ErrInvalid)
	}
	var errs []error
	for _, s := range n.Allow {
		e, err := policy.ParseNetworkEntry(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("allow: %w", err))
			continue
		}
		c.allow = append(c.allow, e)
	}
	for _, s := range n.Deny {
		e, err := policy.ParseNetworkEntry(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("deny: %w", err))
			continue
		}
		c.deny = append(c.deny, e)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	req, err := policy.CompileRequests(n)
	if err != nil {
		return nil, fmt.Errorf("requests: %w", err)
	}
	c.req = req
	// An allow rule's host is reachable: the rules then say what passes.
	for _, r := range req.Rules {
		if r.Allow() {
			c.allow = append(c.allow, r.Entry)
		}
	}
	if c.budgets, err = compileBudgets(n.Budgets); err != nil {
		return nil, err
	}
	return c, nil
}

// checkTarget is the name stage: mode, deny rules, allow rules, all on the
// normalised target before any lookup. It returns "" when the target may
// proceed to resolution.
func (c *compiled) checkTarget(h policy.Host, port uint16) string {
	if c.mode == policy.NetworkNone {
		return "network mode none"
	}
	for _, e := range c.deny {
		if e.Match(h, int(port)) {
			return "denied by rule " + e.String()
		}
	}
	if c.mode == policy.NetworkOpen {
		return ""
	}
	for _, e := range c.allow {
		if e.Match(h, int(port)) {
			return ""
		}
	}
	if len(c.allow) == 0 {
		return "allow list is empty"
	}
	if h.IsIP() {
		return "IP address not in an allowed CIDR"
	}
	return "host not in allow list"
}

// checkAddr is the address stage, on one resolved (or literal) address: deny
// CIDRs, then the SSRF guard, which only an allow-list CIDR that covers the
// address (and is not a catch-all /0) lifts.
func (c *compiled) checkAddr(addr netip.Addr, port uint16, own []netip.Addr) string {
	addr = addr.Unmap()
	for _, e := range c.deny {
		if e.MatchAddr(addr, int(port)) {
			return "address denied by rule " + e.String()
		}
	}
	why := specialReason(addr, own)
	if why == "" {
		return ""
	}
	for _, e := range c.allow {
		if e.Prefix.Bits() > 0 && e.MatchAddr(addr, int(port)) {
			return ""
		}
	}
	return "address " + addr.String() + " is " + why
}
