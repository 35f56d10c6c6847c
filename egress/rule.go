package egress

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/airlock-dev/airlock/sandbox"
)

// RuleKind says what a Rule matches.
type RuleKind int

// Rule kinds.
const (
	RuleName     RuleKind = iota + 1 // exact host name
	RuleWildcard                     // "*.suffix": any name strictly below suffix
	RulePrefix                       // CIDR (an IP literal is a /32 or /128)
)

// Rule is one parsed network allow/deny entry.
type Rule struct {
	Kind   RuleKind
	Name   string       // RuleName: the name; RuleWildcard: the suffix without "*."
	Prefix netip.Prefix // RulePrefix
	Port   uint16       // 0: any port
	Raw    string
}

// String is the rule as written.
func (r Rule) String() string { return r.Raw }

// ParseRule parses one network policy entry:
//
//	example.com            the name itself, any port
//	example.com:443        the name, port 443 only
//	*.example.com          any name below example.com (a.example.com,
//	                       a.b.example.com) but NOT example.com itself;
//	                       list both to allow both
//	*.example.com:8443     the same, one port
//	10.0.0.0/8, ::1/128    addresses in the CIDR, any port
//	10.0.0.0/8:5432        addresses in the CIDR, port 5432 only
//	203.0.113.7            one address (a /32; IPv6 bare or in brackets)
//	203.0.113.7:443        one address, one port ([2001:db8::1]:443)
//
// Names are normalised exactly like connection targets (NormalizeHost), so
// a rule and a target compare in one canonical form. A wildcard must cover
// at least two labels ("*.com" is refused: use mode open) and "*" only as
// the whole leftmost label. Errors wrap sandbox.ErrInvalid.
func ParseRule(s string) (Rule, error) {
	r, err := parseRule(s)
	if err != nil {
		return Rule{}, fmt.Errorf("parse network rule %q: %w", s, err)
	}
	r.Raw = s
	return r, nil
}

func parseRule(s string) (Rule, error) {
	if s == "" {
		return Rule{}, fmt.Errorf("empty: %w", sandbox.ErrInvalid)
	}
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		var port uint16
		if j := strings.IndexByte(s[i:], ':'); j >= 0 {
			var err error
			if port, err = parsePort(s[i+j+1:]); err != nil {
				return Rule{}, err
			}
			s = s[:i+j]
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return Rule{}, fmt.Errorf("bad CIDR: %w", sandbox.ErrInvalid)
		}
		if p.Addr().Zone() != "" {
			return Rule{}, fmt.Errorf("zone in CIDR: %w", sandbox.ErrInvalid)
		}
		if p.Addr().Is4In6() {
			// ::ffff:10.0.0.0/104 means 10.0.0.0/8: targets are unmapped.
			if p.Bits() < 96 {
				return Rule{}, fmt.Errorf("IPv4-mapped CIDR shorter than /96: %w", sandbox.ErrInvalid)
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return Rule{Kind: RulePrefix, Prefix: p.Masked(), Port: port}, nil
	}
	host, port, err := splitRuleHostPort(s)
	if err != nil {
		return Rule{}, err
	}
	wild := false
	if strings.HasPrefix(host, "*.") {
		wild = true
		host = host[2:]
	}
	if strings.Contains(host, "*") {
		return Rule{}, fmt.Errorf("'*' only as the whole leftmost label: %w", sandbox.ErrInvalid)
	}
	h, err := NormalizeHost(host)
	if err != nil {
		return Rule{}, err
	}
	if h.IsIP() {
		if wild {
			return Rule{}, fmt.Errorf("wildcard over an IP address: %w", sandbox.ErrInvalid)
		}
		return Rule{Kind: RulePrefix, Prefix: netip.PrefixFrom(h.Addr, h.Addr.BitLen()), Port: port}, nil
	}
	if wild {
		if !strings.Contains(h.Name, ".") {
			return Rule{}, fmt.Errorf("wildcard over a single label: %w", sandbox.ErrInvalid)
		}
		return Rule{Kind: RuleWildcard, Name: h.Name, Port: port}, nil
	}
	return Rule{Kind: RuleName, Name: h.Name, Port: port}, nil
}

// splitRuleHostPort splits "host", "host:port", "[v6]" or "[v6]:port".
func splitRuleHostPort(s string) (string, uint16, error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, fmt.Errorf("unterminated '[': %w", sandbox.ErrInvalid)
		}
		host, rest := s[:end+1], s[end+1:]
		if rest == "" {
			return host, 0, nil
		}
		if rest[0] != ':' {
			return "", 0, fmt.Errorf("junk after ']': %w", sandbox.ErrInvalid)
		}
		p, err := parsePort(rest[1:])
		return host, p, err
	}
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return s, 0, nil
	}
	if strings.Count(s, ":") > 1 {
		// A bare IPv6 address, never with a port ("2001:db8::1:443" is an
		// address): a port needs brackets.
		if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
			return "[" + s + "]", 0, nil
		}
		return "", 0, fmt.Errorf("IPv6 address with a port must be in brackets: %w", sandbox.ErrInvalid)
	}
	p, err := parsePort(s[i+1:])
	return s[:i], p, err
}

// parsePort accepts a decimal port 1-65535 without sign or leading zeros.
func parsePort(s string) (uint16, error) {
	if s == "" || len(s) > 5 || s[0] == '0' {
		return 0, fmt.Errorf("bad port %q: %w", s, sandbox.ErrInvalid)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("bad port %q: %w", s, sandbox.ErrInvalid)
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("bad port %q: %w", s, sandbox.ErrInvalid)
	}
	return uint16(n), nil
}

// matchName reports whether r matches the host name at port.
func (r Rule) matchName(name string, port uint16) bool {
	if r.Port != 0 && r.Port != port {
		return false
	}
	switch r.Kind {
	case RuleName:
		return name == r.Name
	case RuleWildcard:
		return len(name) > len(r.Name)+1 && strings.HasSuffix(name, "."+r.Name)
	}
	return false
}

// matchAddr reports whether r is a CIDR rule containing addr at port.
func (r Rule) matchAddr(addr netip.Addr, port uint16) bool {
	if r.Kind != RulePrefix || (r.Port != 0 && r.Port != port) {
		return false
	}
	return r.Prefix.Contains(addr.Unmap())
}
