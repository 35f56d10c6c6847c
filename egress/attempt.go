package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// attempt is one connection attempt from the sandbox: one CONNECT, one
// SOCKS5 request or one plain-HTTP upstream connection. It becomes exactly
// one audit event.
type attempt struct {
	proto   string // "connect", "socks5", "http"
	rawHost string // as the client sent it (quoted in events when odd)
	host    policy.Host
	port    uint16
	addr    netip.AddrPort // the address connected to
	reason  string         // why denied, or "" when allowed
	mitm    bool
	start   time.Time
	peer    sandbox.EgressPeer // the program that connected

	sent, recv atomic.Int64
	requests   atomic.Int64 // HTTP requests relayed (plain or intercepted)
	budget     *budget      // the host's budget, nil: none
	secrets    []string     // names of secrets injected
	leaked     []string     // names of secrets whose placeholders went elsewhere

	mu      sync.Mutex
	closers []func()
	cutWhy  string
}

var (
	errDenied  = errors.New("denied by egress policy")
	errResolve = errors.New("cannot resolve")
	errDial    = errors.New("cannot connect")
)

// open runs the whole decision for a: name stage, resolution on the host,
// address stage (deny CIDRs, SSRF guard) and the dial to the exact address
// checked. It returns the upstream connection, counted into a.
func (p *Proxy) open(ctx context.Context, a *attempt) (net.Conn, error) {
	pol := p.policy()
	if why := pol.checkTarget(a.host, a.port); why != "" {
		a.reason = why
		return nil, errDenied
	}
	a.budget = pol.budgetFor(a.host, a.port)
	if a.proto != "http" && !pol.hasRules(a.host, a.port) {
		// Requests inside a tunnel are invisible: count the connection.
		if why := a.budget.spend(time.Now()); why != "" {
			a.reason = why
			return nil, errDenied
		}
	}
	own, err := p.ownAddrs()
	if err != nil {
		a.reason = "cannot list host addresses: " + err.Error()
		return nil, errDenied
	}
	var addrs []netip.Addr
	if a.host.IsIP() {
		addrs = []netip.Addr{a.host.Addr}
	} else {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		addrs, err = p.resolver.LookupNetIP(rctx, "ip", a.host.Name)
		cancel()
		if err != nil || len(addrs) == 0 {
			a.reason = "cannot resolve " + a.host.Name
			return nil, errResolve
		}
	}
	// Every resolved address is checked; the ones that pass are tried in
	// order. One refused address among the answers is logged via reason
	// if nothing else passes.
	var ok []netip.Addr
	var firstWhy string
	for _, ad := range addrs {
		ad = ad.Unmap().WithZone("")
		if why := pol.checkAddr(ad, a.port, own); why != "" {
			if firstWhy == "" {
				firstWhy = why
			}
			continue
		}
		ok = append(ok, ad)
	}
	if len(ok) == 0 {
		a.reason = firstWhy
		if len(addrs) > 0 {
			a.addr = netip.AddrPortFrom(addrs[0].Unmap(), a.port)
		}
		return nil, errDenied
	}
	if len(ok) > 4 {
		ok = ok[:4]
	}
	var lastErr error
	for _, ad := range ok {
		ap := netip.AddrPortFrom(ad, a.port)
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		conn, err := p.dial(dctx, "tcp", ap)
		cancel()
		if err == nil {
			a.addr = ap
			return &countConn{Conn: conn, a: a, p: p}, nil
		}
		lastErr = err
	}
	a.addr = netip.AddrPortFrom(ok[0], a.port)
	a.reason = "connect failed: " + lastErr.Error()
	return nil, errDial
}

// track registers a as active (closable by SetNetwork) with its closers.
// It reports false when the policy changed in between and a is no longer
// allowed.
func (p *Proxy) track(a *attempt, closers ...func()) bool {
	a.mu.Lock()
	a.closers = append(a.closers, closers...)
	a.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pol.checkTarget(a.host, a.port) != "" {
		return false
	}
	p.active[a] = struct{}{}
	return true
}

func (p *Proxy) untrack(a *attempt) {
	p.mu.Lock()
	delete(p.active, a)
	p.mu.Unlock()
}

// cut closes a's connections (a live policy change).
func (a *attempt) cut(why string) {
	a.mu.Lock()
	a.cutWhy = why
	cs := a.closers
	a.mu.Unlock()
	for _, c := range cs {
		c()
	}
}

// deny records a refused attempt.
func (p *Proxy) deny(a *attempt) {
	if a.reason == "" {
		a.reason = "denied"
	}
	p.denied.Add(1)
	p.emit(a, false)
}

// finish records an allowed attempt once its connection is over.
func (p *Proxy) finish(a *attempt) {
	p.untrack(a)
	p.allowed.Add(1)
	p.emit(a, true)
}

func (p *Proxy) emit(a *attempt, allowed bool) {
	target := a.host.String()
	if target == "" {
		target = a.rawHost
	}
	f := map[string]any{
		"action":     map[bool]string{true: "allow", false: "deny"}[allowed],
		"proto":      a.proto,
		"host":       target,
		"port":       int(a.port),
		"bytes_sent": a.sent.Load(),
		"bytes_recv": a.recv.Load(),
	}
	if a.rawHost != "" && a.rawHost != target {
		f["requested"] = a.rawHost
	}
	if a.addr.IsValid() {
		f["addr"] = a.addr.Addr().String()
	}
	if a.reason != "" {
		f["reason"] = a.reason
	}
	if a.mitm {
		f["tls_intercepted"] = true
	}
	if n := a.requests.Load(); n > 0 {
		f["requests"] = n
	}
	if len(a.secrets) > 0 {
		f["secrets_injected"] = a.secrets
	}
	if len(a.leaked) > 0 {
		f["placeholders_not_replaced"] = a.leaked
	}
	a.mu.Lock()
	if a.cutWhy != "" {
		f["closed_by"] = a.cutWhy
	}
	a.mu.Unlock()
	if !a.start.IsZero() {
		f["duration_ms"] = time.Since(a.start).Milliseconds()
	}
	hp := net.JoinHostPort(target, strconv.Itoa(int(a.port)))
	msg := "egress allowed " + hp
	if !allowed {
		msg = "egress denied " + hp + ": " + a.reason
	}
	p.audit.Emit(audit.Event{Time: time.Now().UTC(), Sandbox: p.id, Type: audit.TypeEgress, Message: msg, Fields: f})
	if allowed {
		p.log.Debug(msg, "addr", f["addr"], "sent", f["bytes_sent"], "recv", f["bytes_recv"])
	} else {
		p.log.Info(msg)
	}
}

// countConn counts bytes on the upstream side into the attempt and stats.
type countConn struct {
	net.Conn
	a *attempt
	p *Proxy
}

func (c *countConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.a.recv.Add(int64(n))
	c.p.bytesRecv.Add(int64(n))
	return n, err
}

func (c *countConn) Write(b []byte) (int, error) {
	if why := c.a.budget.spendBytes(len(b)); why != "" {
		c.p.overBudget(c.a, why)
		c.Conn.Close()
		return 0, errBudget
	}
	n, err := c.Conn.Write(b)
	c.a.sent.Add(int64(n))
	c.p.bytesSent.Add(int64(n))
	return n, err
}

// CloseWrite half-closes when the underlying connection can.
func (c *countConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// quoteHost makes a client-supplied host printable for events.
func quoteHost(s string) string {
	if len(s) > 256 {
		s = s[:256]
	}
	q := strconv.Quote(s)
	if q[1:len(q)-1] == s {
		return s
	}
	return q
}
