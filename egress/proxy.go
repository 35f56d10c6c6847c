package egress

import (
	"bufio"
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// Resolver looks up a host name on the host. *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// StaticResolver is a fixed name -> addresses table (tests, pinned names).
// Names are normalised host names.
type StaticResolver map[string][]netip.Addr

// LookupNetIP returns the table's addresses for host.
func (s StaticResolver) LookupNetIP(_ context.Context, _ string, host string) ([]netip.Addr, error) {
	if a, ok := s[host]; ok && len(a) > 0 {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// Config configures one sandbox's proxy.
type Config struct {
	SandboxID string
	Network   policy.Network
	Secrets   []policy.Secret
	Audit     audit.Sink   // nil: discard
	Log       *slog.Logger // nil: discard
	// Resolver resolves names on the host; nil: net.DefaultResolver.
	Resolver Resolver
	// Dial connects to a checked address; nil: a net.Dialer.
	Dial func(ctx context.Context, network string, addr netip.AddrPort) (net.Conn, error)
	// Getenv and ReadFile are the secret sources; nil: os.Getenv, os.ReadFile.
	Getenv   func(string) string
	ReadFile func(string) ([]byte, error)
	// RootCAs verifies the real servers behind secret hosts; nil: system roots.
	RootCAs *x509.CertPool
	// LocalAddrs lists the host's own addresses (refused by the SSRF guard);
	// nil: the addresses of every interface.
	LocalAddrs func() ([]netip.Addr, error)
	// ListenAddr is where the in-sandbox listener is (default sandbox.EgressAddr);
	// it only shapes SandboxEnv.
	ListenAddr string
}

// Stats counts what the proxy did.
type Stats struct {
	Allowed          int64 `json:"allowed"`
	Denied           int64 `json:"denied"`
	Active           int64 `json:"active"`
	BytesSent        int64 `json:"bytes_sent"`     // sandbox -> world
	BytesReceived    int64 `json:"bytes_received"` // world -> sandbox
	SecretsInjected  int64 `json:"secrets_injected"`
	PlaceholderLeaks int64 `json:"placeholder_leaks"` // placeholders seen going elsewhere
}

// Proxy is one sandbox's egress proxy. Safe for concurrent use.
type Proxy struct {
	id       string
	log      *slog.Logger
	audit    audit.Sink
	resolver Resolver
	dial     func(ctx context.Context, network string, addr netip.AddrPort) (net.Conn, error)
	rootCAs  *x509.CertPool
	local    func() ([]netip.Addr, error)
	listen   string
	secrets  []*secret
	ca       *authority
	caHosts  []policy.NetworkEntry // what ca may name

	// watchMu serialises policy changes with telling watchers (the
	// backend's agent) whether rules name programs.
	watchMu  sync.Mutex
	watchers map[int]func(bool)
	watchSeq int
	programs bool // what watchers were last told

	mu     sync.RWMutex
	pol    *compiled
	active map[*attempt]struct{}

	ownMu   sync.Mutex
	own     []netip.Addr
	ownTime time.Time

	allowed, denied, bytesSent, bytesRecv, injected, leaks atomic.Int64
}

// New builds a sandbox's proxy: parses the network policy, loads the
// secrets' real values and makes the sandbox's CA. Errors wrap
// sandbox.ErrInvalid; nothing is left behind on error.
func New(cfg Config) (*Proxy, error) {
	pol, err := compileNetwork(cfg.Network)
	if err != nil {
		return nil, fmt.Errorf("egress proxy %q: %w", cfg.SandboxID, err)
	}
	getenv, readFile := cfg.Getenv, cfg.ReadFile
	if getenv == nil {
		getenv = os.Getenv
	}
	if readFile == nil {
		readFile = os.ReadFile
	}
	secrets, err := loadSecrets(cfg.Secrets, getenv, readFile)
	if err != nil {
		return nil, fmt.Errorf("egress proxy %q: %w", cfg.SandboxID, err)
	}
	var hosts []policy.NetworkEntry
	for _, s := range secrets {
		hosts = append(hosts, s.hosts...)
	}
	// Hosts with request rules are intercepted too, so the CA may name them.
	for _, r := range append(append([]*policy.CompiledRule{}, pol.req.Rules...), pol.req.Bounds...) {
		hosts = append(hosts, r.Entry)
	}
	ca, err := newAuthority(cfg.SandboxID, hosts)
	if err != nil {
		return nil, fmt.Errorf("egress proxy %q: %w", cfg.SandboxID, err)
	}
	p := &Proxy{
		id:       cfg.SandboxID,
		log:      cfg.Log,
		audit:    cfg.Audit,
		resolver: cfg.Resolver,
		dial:     cfg.Dial,
		rootCAs:  cfg.RootCAs,
		local:    cfg.LocalAddrs,
		listen:   cfg.ListenAddr,
		secrets:  secrets,
		ca:       ca,
		caHosts:  hosts,
		pol:      pol,
		active:   map[*attempt]struct{}{},
		programs: pol.namesPrograms(),
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.log = p.log.With("component", "egress", "sandbox", cfg.SandboxID)
	if p.audit == nil {
		p.audit = audit.Discard
	}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	if p.dial == nil {
		d := &net.Dialer{Timeout: 10 * time.Second}
		p.dial = func(ctx context.Context, network string, addr netip.AddrPort) (net.Conn, error) {
			return d.DialContext(ctx, network, addr.String())
		}
	}
	if p.local == nil {
		p.local = interfaceAddrs
	}
	if p.listen == "" {
		p.listen = sandbox.EgressAddr
	}
	return p, nil
}

func interfaceAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out, nil
}

// ownAddrs returns the host's addresses, refreshed at most every 5 s.
func (p *Proxy) ownAddrs() ([]netip.Addr, error) {
	p.ownMu.Lock()
	defer p.ownMu.Unlock()
	if p.own != nil && time.Since(p.ownTime) < 5*time.Second {
		return p.own, nil
	}
	own, err := p.local()
	if err != nil {
		return nil, err
	}
	if own == nil {
		own = []netip.Addr{}
	}
	p.own, p.ownTime = own, time.Now()
	return own, nil
}

func (p *Proxy) policy() *compiled {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.pol
}

// SetNetwork replaces the network policy of the running sandbox. Only host
// components (server API, CLI) hold the *Proxy, so nothing inside the
// sandbox can call it. Open connections the new policy no longer allows are
// closed. The change is audited.
func (p *Proxy) SetNetwork(n policy.Network) error {
	c, err := compileNetwork(n)
	if err != nil {
		return fmt.Errorf("set network of sandbox %q: %w", p.id, err)
	}
	for _, r := range append(append([]*policy.CompiledRule{}, c.req.Rules...), c.req.Bounds...) {
		if !p.caCovers(r.Entry) {
			return fmt.Errorf("set network of sandbox %q: request rules for %s: the sandbox's CA was made without that host (rules for new hosts need a new sandbox): %w", p.id, r.Entry.String(), sandbox.ErrInvalid)
		}
	}
	p.watchMu.Lock() // one change at a time: only this writes p.pol
	defer p.watchMu.Unlock()
	old := p.policy()
	if len(old.raw.Bounds) > 0 {
		// Bounds (an operator's ceiling) only narrow: a live change keeps them.
		n.Bounds = append(append([]policy.RequestRule{}, old.raw.Bounds...), n.Bounds...)
		if c, err = compileNetwork(n); err != nil {
			return fmt.Errorf("set network of sandbox %q: %w", p.id, err)
		}
	}
	programs := c.namesPrograms()
	if programs {
		// Before the rules: the first connection they decide is named.
		p.tellPrograms(true)
	}
	p.mu.Lock()
	p.pol = c
	var cut []*attempt
	for a := range p.active {
		if c.checkTarget(a.host, a.port) != "" || c.checkAddr(a.addr.Addr(), a.port, nil) != "" {
			cut = append(cut, a)
		}
	}
	p.mu.Unlock()
	if !programs {
		p.tellPrograms(false)
	}
	for _, a := range cut {
		a.cut("policy changed")
	}
	p.audit.Emit(audit.Event{
		Time: time.Now().UTC(), Sandbox: p.id, Type: audit.TypePolicy,
		Message: "network policy changed",
		Fields: map[string]any{
			"old_mode": old.raw.Mode, "old_allow": old.raw.Allow, "old_deny": old.raw.Deny,
			"mode": n.Mode, "allow": n.Allow, "deny": n.Deny, "closed_connections": len(cut),
		},
	})
	p.log.Info("network policy changed", "mode", n.Mode, "closed", len(cut))
	return nil
}

// caCovers reports whether the sandbox CA may name every host of e.
func (p *Proxy) caCovers(e policy.NetworkEntry) bool {
	for _, h := range p.caHosts {
		if e.Host == "" {
			if h.Host == "" && h.Prefix.IsValid() && h.Prefix.Contains(e.Prefix.Addr()) && e.Prefix.Bits() >= h.Prefix.Bits() && (h.Port == 0 || h.Port == e.Port) {
				return true
			}
			continue
		}
		if h.Host == e.Host && h.Wildcard == e.Wildcard && (h.Port == 0 || h.Port == e.Port) {
			return true
		}
		if h.Wildcard && strings.HasSuffix(e.Host, "."+h.Host) && (h.Port == 0 || h.Port == e.Port) {
			return true
		}
	}
	return false
}

// Network returns the network policy in force.
func (p *Proxy) Network() policy.Network { return p.policy().raw }

// Stats returns the counters so far.
func (p *Proxy) Stats() Stats {
	p.mu.RLock()
	active := int64(len(p.active))
	p.mu.RUnlock()
	return Stats{
		Allowed: p.allowed.Load(), Denied: p.denied.Load(), Active: active,
		BytesSent: p.bytesSent.Load(), BytesReceived: p.bytesRecv.Load(),
		SecretsInjected: p.injected.Load(), PlaceholderLeaks: p.leaks.Load(),
	}
}

// CAPEM returns the sandbox CA certificate (PEM).
func (p *Proxy) CAPEM() []byte { return p.ca.PEM() }

// headerTimeout bounds how long a client may take to say where it goes.
const headerTimeout = 30 * time.Second

// ServeEgress serves one tunnelled connection from inside the sandbox: an
// HTTP proxy request (absolute URI or CONNECT) or SOCKS5 (first byte 0x05).
// It returns when the connection is done and always closes conn. It
// implements sandbox.EgressHandler.
func (p *Proxy) ServeEgress(ctx context.Context, sandboxID string, conn io.ReadWriteCloser) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer conn.Close()
	defer func() {
		// A bug reached by sandbox input must not take the host process
		// down with every other sandbox: this connection ends, loudly.
		if r := recover(); r != nil {
			p.log.Error("egress: panic serving a connection", "panic", r, "stack", string(debug.Stack()))
			p.deny(&attempt{proto: "unknown", reason: fmt.Sprintf("internal error: %v", r)})
		}
	}()
	if sandboxID != p.id {
		p.log.Warn("egress stream for another sandbox refused", "stream_sandbox", sandboxID)
		p.deny(&attempt{proto: "unknown", rawHost: "", reason: "stream for sandbox " + sandboxID})
		return
	}
	go func() {
		<-ctx.Done()
		conn.Close()
	}()
	c := &client{rwc: conn, br: bufio.NewReaderSize(conn, maxHeaderBytes), peer: sandbox.EgressPeerFrom(ctx)}
	timer := time.AfterFunc(headerTimeout, func() { conn.Close() })
	c.stopTimer = func() { timer.Stop() }
	defer c.stopTimer()
	first, err := c.br.Peek(1)
	if err != nil {
		return
	}
	if first[0] == socksVersion {
		p.serveSOCKS(ctx, c)
		return
	}
	if b := first[0]; b < 'A' || b > 'Z' {
		// Every HTTP method starts with an upper-case letter; TLS straight
		// to the proxy (0x16), SOCKS4 (0x04) and garbage end here.
		p.deny(&attempt{proto: "unknown", reason: fmt.Sprintf("not an HTTP or SOCKS5 request (first byte 0x%02x)", b)})
		return
	}
	p.serveHTTP(ctx, c)
}

// client is the sandbox side of one egress stream.
type client struct {
	rwc       io.ReadWriteCloser
	br        *bufio.Reader
	stopTimer func()
	peer      sandbox.EgressPeer // the program behind it, as the agent verified it
}

var _ sandbox.EgressHandler = (*Proxy)(nil)
