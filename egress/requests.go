package egress

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// rawRequest is what the proxy reads from a request's header block before
// net/http parses (and normalises) it: the request-target exactly as sent
// and whether both body framings were given.
type rawRequest struct {
	method, target string
	clte           bool
}

// readRaw reads the facts of block (a complete header block).
func readRaw(block []byte) rawRequest {
	var r rawRequest
	line, rest, _ := bytes.Cut(block, []byte("\n"))
	parts := strings.Split(strings.TrimRight(string(line), "\r"), " ")
	if len(parts) == 3 {
		r.method, r.target = parts[0], parts[1]
	}
	var cl, te bool
	for _, l := range bytes.Split(rest, []byte("\n")) {
		name, _, ok := bytes.Cut(l, []byte(":"))
		if !ok {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(string(name))) {
		case "content-length":
			cl = true
		case "transfer-encoding":
			te = true
		}
	}
	r.clte = cl && te
	return r
}

// hasRules reports whether requests to h:port are checked by request
// rules (the host's TLS is then intercepted).
func (c *compiled) hasRules(h policy.Host, port uint16) bool {
	if c.req == nil {
		return false
	}
	return len(policy.For(c.req.Rules, h, int(port))) > 0 || len(policy.For(c.req.Bounds, h, int(port))) > 0
}

// requestDecision is the verdict on one HTTP request.
type requestDecision struct {
	why  string // "" when allowed
	rule string // the rule that decided, if any
	hint string // how to allow it, for the 403 body
}

// checkRequest decides one HTTP request to a's target. raw is the header
// block as read; origin says the target must be origin-form (inside
// intercepted TLS) rather than an absolute URI (a plain proxy request).
func (p *Proxy) checkRequest(a *attempt, req *http.Request, raw rawRequest, origin bool) requestDecision {
	pol := p.policy()
	ruled := pol.hasRules(a.host, a.port)
	var d requestDecision
	path, why := requestPath(raw, req, origin)
	switch {
	case why != "":
		d.why = why
	case raw.clte:
		d.why = "request with both Content-Length and Transfer-Encoding (request smuggling)"
	case raw.method != "" && raw.method != req.Method || strings.ToUpper(req.Method) != req.Method:
		d.why = "method " + quoteHost(req.Method) + " is not upper case"
	}
	if d.why == "" {
		d.why = p.spendRequest(a.host, a.port)
	}
	if d.why != "" || !ruled {
		if ruled || d.why != "" {
			p.emitRequest(a, req, path, d)
		}
		return d
	}
	segs, why := pathSegments(path)
	if why != "" {
		d.why = why
		p.emitRequest(a, req, path, d)
		return d
	}
	q, err := url.ParseQuery(req.URL.RawQuery)
	if err != nil {
		d.why = "malformed query"
		p.emitRequest(a, req, path, d)
		return d
	}
	r := &policy.Request{Host: a.host, Port: int(a.port), Method: req.Method, Segments: segs, Query: q, Header: req.Header, Program: a.peer.Program}
	d = decide(pol.req, r)
	if d.why != "" && namesPrograms(pol.req, r) {
		d.why += " for " + programLabel(a.peer)
	}
	if d.why != "" {
		d.hint = fmt.Sprintf("--allow-request '%s %s%s'", req.Method, a.host.String(), path)
	}
	p.emitRequest(a, req, path, d)
	return d
}

// decide applies bounds, then the host's rules, first match wins.
func decide(rs *policy.Requests, r *policy.Request) requestDecision {
	if bs := policy.For(rs.Bounds, r.Host, r.Port); len(bs) > 0 {
		ok := false
		for _, b := range bs {
			if b.Match(r) {
				if !b.Allow() {
					return requestDecision{why: "denied by the operator's bound " + b.Rule.String(), rule: b.Rule.String()}
				}
				ok = true
				break
			}
		}
		if !ok {
			return requestDecision{why: "outside the operator's bounds for " + r.Host.String()}
		}
	}
	rules := policy.For(rs.Rules, r.Host, r.Port)
	if len(rules) == 0 {
		return requestDecision{}
	}
	for _, c := range rules {
		if c.Match(r) {
			if c.Allow() {
				return requestDecision{rule: c.Rule.String()}
			}
			return requestDecision{why: "denied by request rule " + c.Rule.String(), rule: c.Rule.String()}
		}
	}
	return requestDecision{why: "no request rule for " + r.Host.String() + " matches"}
}

// namesPrograms reports whether a rule or bound for r's host names programs.
func namesPrograms(rs *policy.Requests, r *policy.Request) bool {
	for _, list := range [][]*policy.CompiledRule{rs.Rules, rs.Bounds} {
		for _, c := range policy.For(list, r.Host, r.Port) {
			if len(c.Rule.Programs) > 0 {
				return true
			}
		}
	}
	return false
}

// programLabel names the peer in a refusal.
func programLabel(p sandbox.EgressPeer) string {
	if p.Program != "" {
		return "program " + p.Program
	}
	return "an unverified program (" + p.Unverified + ")"
}

// requestPath returns the path of the raw request-target (without query),
// refusing targets that are not of the expected form.
func requestPath(raw rawRequest, req *http.Request, origin bool) (string, string) {
	t := raw.target
	if t == "" {
		t = req.RequestURI
	}
	if !origin {
		// absolute-form: scheme://authority/path?query
		_, rest, ok := strings.Cut(t, "://")
		if !ok {
			return "", "a proxy request needs an absolute http:// URI"
		}
		i := strings.IndexAny(rest, "/?")
		if i < 0 {
			return "/", ""
		}
		t = rest[i:]
		if t[0] == '?' {
			t = "/" + t
		}
	} else if !strings.HasPrefix(t, "/") {
		return "", "request target " + quoteHost(t) + " is not origin-form (absolute-form or * refused inside TLS)"
	}
	path, _, _ := strings.Cut(t, "?")
	return path, ""
}

// pathSegments decodes a raw path into segments, refusing every form two
// servers might read differently: encoded "/", "\", "." or "%", control
// bytes, ";" parameters, ".", ".." and empty segments (but a trailing one).
func pathSegments(path string) ([]string, string) {
	if strings.ContainsAny(path, ";\\#") {
		return nil, "path " + quoteHost(path) + " contains ;, \\ or # (ambiguous between servers)"
	}
	segs := strings.Split(path[1:], "/")
	for i, s := range segs {
		d, err := url.PathUnescape(s)
		if err != nil {
			return nil, "path " + quoteHost(path) + ": bad percent-encoding"
		}
		lower := strings.ToLower(s)
		for _, bad := range []string{"%2f", "%5c", "%2e", "%25", "%3b"} {
			if strings.Contains(lower, bad) {
				return nil, "path " + quoteHost(path) + ": encoded " + bad + " refused"
			}
		}
		if strings.IndexFunc(d, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
			return nil, "path " + quoteHost(path) + ": control character"
		}
		if d == "." || d == ".." || d == "" && i != len(segs)-1 {
			return nil, "path " + quoteHost(path) + ": empty, . or .. segment"
		}
		segs[i] = d
	}
	return segs, ""
}

// emitRequest records one request decision as an audit event.
func (p *Proxy) emitRequest(a *attempt, req *http.Request, path string, d requestDecision) {
	f := map[string]any{
		"action": "allow", "proto": a.proto, "host": a.host.String(), "port": int(a.port),
		"method": req.Method, "path": path, "request": true,
	}
	if a.peer.Program != "" {
		f["program"] = a.peer.Program
	} else if a.peer.Unverified != "" {
		f["program_unverified"] = a.peer.Unverified
	}
	msg := "egress request allowed " + req.Method + " " + a.host.String() + path
	if d.why != "" {
		f["action"], f["reason"] = "deny", d.why
		msg = "egress request denied " + req.Method + " " + a.host.String() + path + ": " + d.why
		p.denied.Add(1)
	}
	if d.rule != "" {
		f["rule"] = d.rule
	}
	if d.hint != "" {
		f["allow_with"] = d.hint
	}
	p.audit.Emit(audit.Event{Time: time.Now().UTC(), Sandbox: p.id, Type: audit.TypeEgress, Message: msg, Fields: f})
	if d.why != "" {
		p.log.Info(msg)
	}
}

// refuseRequest writes the 403 that says why and how to allow it.
func refuseRequest(w interface{ Write([]byte) (int, error) }, req *http.Request, d requestDecision) {
	why := req.Method + " refused: " + d.why
	if d.hint != "" {
		why += "; to allow it: " + d.hint
	}
	writeStatus(w, http.StatusForbidden, why)
}
