package policy

import (
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
)

// RequestRule is one HTTP request rule of network.requests (or bounds):
// which requests to Host may pass (Action allow, the default) or not
// (deny). Rules for a host are tried in order; the first that matches
// decides.
type RequestRule struct {
	// Host is a name, "*.name" or one IP address (IPv6 in brackets when a
	// port follows), with an optional ":port" (any port when absent).
	// Ranges are not accepted.
	Host string `yaml:"host" json:"host"`
	// Methods are upper-case method names; empty or ["*"]: any method.
	Methods []string `yaml:"methods,omitempty" json:"methods,omitempty"`
	// Path is a glob over "/"-separated segments: "*" is one whole
	// segment, "**" any number of segments (also none); "" is "/**".
	Path string `yaml:"path,omitempty" json:"path,omitempty"`
	// Query names parameters that must be present, each with a value
	// matching the glob ("*" inside a value is any run of characters).
	Query map[string]string `yaml:"query,omitempty" json:"query,omitempty"`
	// Headers names request headers that must be present, matched like
	// Query values.
	Headers map[string]string `yaml:"headers,omitempty" json:"headers,omitempty"`
	// Action is "allow" (default) or "deny".
	Action string `yaml:"action,omitempty" json:"action,omitempty"`
	// Programs, when set, limit the rule to requests made by these
	// programs inside the sandbox: an absolute path is that executable, a
	// bare name any verified executable of that name. A request whose
	// program is not verified matches no rule that names programs.
	Programs []string `yaml:"programs,omitempty" json:"programs,omitempty"`
}

// GitRules expand to request rules for git's smart HTTP protocol: Fetch
// hosts allow clone and fetch of any repository there; Push entries
// ("host/org/*", "host/org/repo") allow push to the repositories the path
// glob names (".git" suffix or not). Nothing else on those hosts passes
// unless another request rule allows it.
type GitRules struct {
	Fetch []string `yaml:"fetch,omitempty" json:"fetch,omitempty"`
	Push  []string `yaml:"push,omitempty" json:"push,omitempty"`
}

func (g *GitRules) merged(base *GitRules) *GitRules {
	out := &GitRules{}
	if base != nil {
		out.Fetch = cloneStrings(base.Fetch)
		out.Push = cloneStrings(base.Push)
	}
	out.Fetch = append(out.Fetch, g.Fetch...)
	out.Push = append(out.Push, g.Push...)
	return out
}

// Budget bounds what a sandbox sends to a host: BytesUp over the
// sandbox's life, RequestsPerMinute (HTTP requests where the proxy sees
// them, connections otherwise). Zero: no bound.
type Budget struct {
	Host              string   `yaml:"host" json:"host"`
	BytesUp           ByteSize `yaml:"bytes_up,omitempty" json:"bytes_up,omitempty"`
	RequestsPerMinute int      `yaml:"requests_per_minute,omitempty" json:"requests_per_minute,omitempty"`
}

func cloneRules(rs []RequestRule) []RequestRule {
	out := make([]RequestRule, 0, len(rs))
	for _, r := range rs {
		r.Methods = cloneStrings(r.Methods)
		r.Programs = cloneStrings(r.Programs)
		if r.Query != nil {
			q := make(map[string]string, len(r.Query))
			for k, v := range r.Query {
				q[k] = v
			}
			r.Query = q
		}
		if r.Headers != nil {
			h := make(map[string]string, len(r.Headers))
			for k, v := range r.Headers {
				h[k] = v
			}
			r.Headers = h
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// ParseRequestRule reads the CLI form "GET,HEAD HOST[:PORT]/PATH-GLOB"
// (optionally "?name=glob&..." after the path), optionally followed by
// "programs=PROG[,PROG...]" (the policy file's programs: absolute paths or
// bare names): an allow rule. "*" as the method list is any method.
func ParseRequestRule(s string) (RequestRule, error) {
	var r RequestRule
	methods, target, ok := strings.Cut(strings.TrimSpace(s), " ")
	target = strings.TrimSpace(target)
	if !ok || target == "" {
		return r, invalidf("request rule %q: want \"METHODS HOST[:PORT]/PATH\" (e.g. \"GET,HEAD github.com/**\")", s)
	}
	target, extra, _ := strings.Cut(target, " ")
	if extra = strings.TrimSpace(extra); extra != "" {
		list, ok := strings.CutPrefix(extra, "programs=")
		if !ok || list == "" || strings.ContainsAny(list, " \t") {
			return r, invalidf("request rule %q: after the target only \"programs=PROG[,PROG...]\" may follow (e.g. \"GET github.com/** programs=git-remote-https\")", s)
		}
		r.Programs = strings.Split(list, ",")
	}
	if methods != "*" {
		r.Methods = strings.Split(methods, ",")
	}
	hostPart, rest, _ := strings.Cut(target, "/")
	r.Host = hostPart
	if seg, _, _ := strings.Cut(rest, "/"); isIPv4(hostPart) && isPrefixLen(seg) {
		// "10.0.0.0/8/x" reads as a CIDR to a person and as host and
		// path here: refuse rather than guess.
		return r, invalidf("request rule %q: %s/%s looks like a CIDR; a request rule names one address", s, hostPart, seg)
	}
	path, query, hasQuery := strings.Cut("/"+rest, "?")
	r.Path = path
	if hasQuery {
		vals, err := url.ParseQuery(query)
		if err != nil {
			return r, invalidf("request rule %q: bad query: %v", s, err)
		}
		r.Query = map[string]string{}
		for k, v := range vals {
			if len(v) != 1 {
				return r, invalidf("request rule %q: query parameter %q given twice", s, k)
			}
			r.Query[k] = v[0]
		}
	}
	if _, err := compileRule(r); err != nil {
		return r, err
	}
	return r, nil
}

func isIPv4(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is4()
}

func isPrefixLen(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 0 && n <= 32
}

// String is the CLI form of r (deny rules prefixed with "deny ").
func (r RequestRule) String() string {
	m := "*"
	if len(r.Methods) > 0 {
		m = strings.Join(r.Methods, ",")
	}
	p := r.Path
	if p == "" {
		p = "/**"
	}
	s := m + " " + r.Host + p
	if len(r.Query) > 0 {
		keys := make([]string, 0, len(r.Query))
		for k := range r.Query {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var q []string
		for _, k := range keys {
			q = append(q, k+"="+r.Query[k])
		}
		s += "?" + strings.Join(q, "&")
	}
	if len(r.Headers) > 0 {
		s += " (with headers)"
	}
	if len(r.Programs) > 0 {
		s += " (programs " + strings.Join(r.Programs, ",") + ")"
	}
	if r.Action == "deny" {
		s = "deny " + s
	}
	return s
}

// CompiledRule is a checked RequestRule ready to match.
type CompiledRule struct {
	Rule    RequestRule
	Entry   NetworkEntry
	methods []string // nil: any
	path    []string // segments
	allow   bool
}

// Allow reports whether a match lets the request pass.
func (c *CompiledRule) Allow() bool { return c.allow }

// Requests is a network policy's compiled request rules.
type Requests struct {
	Rules  []*CompiledRule
	Bounds []*CompiledRule
}

// CompileRequests checks and compiles n's request rules, the git preset
// expanded after them, and the bounds. It is the one parser of request
// rules; the egress proxy matches with what it returns.
func CompileRequests(n Network) (*Requests, error) {
	out := &Requests{}
	rules := append(cloneRules(n.Requests), GitRequestRules(n.Git)...)
	for i, r := range rules {
		c, err := compileRule(r)
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", i, err)
		}
		out.Rules = append(out.Rules, c)
	}
	for i, r := range n.Bounds {
		c, err := compileRule(r)
		if err != nil {
			return nil, fmt.Errorf("bound %d: %w", i, err)
		}
		out.Bounds = append(out.Bounds, c)
	}
	for i, b := range n.Budgets {
		e, err := ParseNetworkEntry(b.Host)
		if err != nil || e.Host == "" {
			return nil, invalidf("budget %d: host %q: want a name, *.name or name:port", i, b.Host)
		}
		if b.BytesUp < 0 || b.RequestsPerMinute < 0 {
			return nil, invalidf("budget %d: negative bound", i)
		}
	}
	return out, nil
}

// GitRequestRules expands a git preset into request rules.
func GitRequestRules(g *GitRules) []RequestRule {
	if g == nil {
		return nil
	}
	var out []RequestRule
	add := func(host, repo, service string) {
		out = append(out,
			RequestRule{Host: host, Methods: []string{"GET"}, Path: repo + "/info/refs", Query: map[string]string{"service": service}},
			RequestRule{Host: host, Methods: []string{"POST"}, Path: repo + "/" + service})
	}
	for _, h := range g.Fetch {
		add(h, "/**", "git-upload-pack")
	}
	for _, p := range g.Push {
		host, repo, _ := strings.Cut(p, "/")
		repo = "/" + strings.TrimSuffix(repo, "/")
		// Pushing needs the refs first, which is an upload-pack read.
		add(host, repo, "git-receive-pack")
		add(host, repo, "git-upload-pack")
	}
	return out
}

func compileRule(r RequestRule) (*CompiledRule, error) {
	c := &CompiledRule{Rule: r}
	e, err := ParseNetworkEntry(r.Host)
	if err != nil {
		return nil, invalidf("request rule host: %v", message(err))
	}
	if e.Host == "" && e.Prefix.Bits() != e.Prefix.Addr().BitLen() {
		return nil, invalidf("request rule host %q: a request rule names one host or one address, not a range", r.Host)
	}
	c.Entry = e
	switch r.Action {
	case "", "allow":
		c.allow = true
	case "deny":
	default:
		return nil, invalidf("request rule %s: action %q: want allow or deny", r.Host, r.Action)
	}
	for _, m := range r.Methods {
		if m == "*" {
			c.methods = nil
			break
		}
		if m == "" || strings.ToUpper(m) != m || strings.IndexFunc(m, func(c rune) bool { return c < 'A' || c > 'Z' }) >= 0 {
			return nil, invalidf("request rule %s: method %q: want upper-case letters (GET, POST, ...)", r.Host, m)
		}
		c.methods = append(c.methods, m)
	}
	p := r.Path
	if p == "" {
		p = "/**"
	}
	if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "?#;%\\ \t") {
		return nil, invalidf("request rule %s: path %q: want /segments with * or ** (no ?, #, ;, %%)", r.Host, p)
	}
	c.path = strings.Split(p[1:], "/")
	for i, s := range c.path {
		if s == "." || s == ".." || s == "" && i != len(c.path)-1 {
			return nil, invalidf("request rule %s: path %q: empty, . or .. segment", r.Host, p)
		}
		if strings.Contains(s, "*") && s != "*" && s != "**" {
			return nil, invalidf("request rule %s: path %q: * must be a whole segment", r.Host, p)
		}
	}
	for k := range r.Headers {
		if k == "" || http.CanonicalHeaderKey(k) == "" {
			return nil, invalidf("request rule %s: bad header name %q", r.Host, k)
		}
	}
	for _, p := range r.Programs {
		if !validProgram(p) {
			return nil, invalidf("request rule %s: program %q: want an absolute clean path (/usr/bin/git) or a bare name (git)", r.Host, p)
		}
	}
	return c, nil
}

// Request is what a rule is matched against: a normalised host and port,
// the method as sent, the decoded path segments (checked by the proxy:
// no ".", "..", or empty segment but a trailing one), the query and the
// headers.
type Request struct {
	Host     Host
	Port     int
	Method   string
	Segments []string
	Query    url.Values
	Header   http.Header
	// Program is the verified executable that made the request ("" when
	// not verified: no rule naming programs matches).
	Program string
}

// For returns the rules (of list) whose host matches h:port.
func For(list []*CompiledRule, h Host, port int) []*CompiledRule {
	var out []*CompiledRule
	for _, c := range list {
		if c.Entry.Match(h, port) {
			out = append(out, c)
		}
	}
	return out
}

// Match reports whether c matches req (host included).
func (c *CompiledRule) Match(req *Request) bool {
	if !c.Entry.Match(req.Host, req.Port) {
		return false
	}
	if c.methods != nil && !slices.Contains(c.methods, req.Method) {
		return false
	}
	if !matchSegments(c.path, req.Segments) {
		return false
	}
	for k, g := range c.Rule.Query {
		v := req.Query[k]
		if len(v) != 1 || !matchValue(g, v[0]) {
			return false
		}
	}
	for k, g := range c.Rule.Headers {
		v := req.Header.Values(k)
		if len(v) != 1 || !matchValue(g, v[0]) {
			return false
		}
	}
	return c.MatchProgram(req.Program)
}

// MatchProgram reports whether program (a verified absolute path, or "")
// is one c's Programs name; a rule without Programs matches any.
func (c *CompiledRule) MatchProgram(program string) bool {
	if len(c.Rule.Programs) == 0 {
		return true
	}
	if program == "" {
		return false
	}
	for _, p := range c.Rule.Programs {
		if p == program || !strings.Contains(p, "/") && p == program[strings.LastIndexByte(program, '/')+1:] {
			return true
		}
	}
	return false
}

// validProgram: an absolute clean path or a bare file name.
func validProgram(p string) bool {
	if p == "" || p == "." || p == ".." || strings.ContainsAny(p, "\x00\n") {
		return false
	}
	if strings.HasPrefix(p, "/") {
		return path.Clean(p) == p && p != "/"
	}
	return !strings.Contains(p, "/")
}

// matchSegments matches path segments against a glob's segments.
func matchSegments(glob, segs []string) bool {
	if len(glob) == 0 {
		return len(segs) == 0
	}
	switch glob[0] {
	case "**":
		for i := 0; i <= len(segs); i++ {
			if matchSegments(glob[1:], segs[i:]) {
				return true
			}
		}
		return false
	case "*":
		return len(segs) > 0 && segs[0] != "" && matchSegments(glob[1:], segs[1:])
	}
	return len(segs) > 0 && segs[0] == glob[0] && matchSegments(glob[1:], segs[1:])
}

// matchValue matches v against g, where "*" is any run of characters.
func matchValue(g, v string) bool {
	star := strings.IndexByte(g, '*')
	if star < 0 {
		return g == v
	}
	if !strings.HasPrefix(v, g[:star]) {
		return false
	}
	rest := g[star+1:]
	for i := star; i <= len(v); i++ {
		if matchValue(rest, v[i:]) {
			return true
		}
	}
	return false
}

// Covers reports whether every request c matches is matched by b too, as
// far as the rule text shows (same host entry, methods and path glob
// within b's, b's query and header conditions among c's). It is the
// create-time check that a tenant's rule stays within a ceiling's.
func (b *CompiledRule) Covers(c *CompiledRule) bool {
	if b.Entry != c.Entry {
		return false
	}
	if b.methods != nil && (c.methods == nil || slices.ContainsFunc(c.methods, func(m string) bool { return !slices.Contains(b.methods, m) })) {
		return false
	}
	if !coverSegments(b.path, c.path) {
		return false
	}
	for k, v := range b.Rule.Query {
		if c.Rule.Query[k] != v {
			return false
		}
	}
	for k, v := range b.Rule.Headers {
		if c.Rule.Headers[k] != v {
			return false
		}
	}
	// A bound naming programs covers only rules naming some of them.
	if len(b.Rule.Programs) > 0 && (len(c.Rule.Programs) == 0 ||
		slices.ContainsFunc(c.Rule.Programs, func(p string) bool { return !slices.Contains(b.Rule.Programs, p) })) {
		return false
	}
	return true
}

func coverSegments(b, c []string) bool {
	if len(b) == 0 {
		return len(c) == 0
	}
	if b[0] == "**" {
		for i := 0; i <= len(c); i++ {
			if coverSegments(b[1:], c[i:]) {
				return true
			}
		}
		return false
	}
	if len(c) == 0 || c[0] == "**" {
		return false
	}
	if b[0] == "*" {
		return c[0] != "" && coverSegments(b[1:], c[1:])
	}
	return b[0] == c[0] && coverSegments(b[1:], c[1:])
}
