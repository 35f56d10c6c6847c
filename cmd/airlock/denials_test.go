package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
)

func TestDenialLogListsRefusedRequests(t *testing.T) {
	var live strings.Builder
	d := newDenialLog(nil, &live)
	ev := audit.Event{Type: audit.TypeEgress, Fields: map[string]any{"request": true, "action": "deny", "method": "POST",
		"host": "api.test", "path": "/x", "reason": "no request rule for api.test matches", "allow_with": "--allow-request 'POST api.test/x'"}}
	d.Emit(ev)
	d.Emit(ev)
	d.Emit(audit.Event{Type: audit.TypeEgress, Fields: map[string]any{"request": true, "action": "allow", "method": "GET", "host": "api.test", "path": "/"}})
	s := d.summary()
	if !strings.Contains(s, "refused 2 HTTP request(s)") || !strings.Contains(s, "POST api.test/x: no request rule for api.test matches (to allow: --allow-request 'POST api.test/x')") || strings.Contains(s, "GET") {
		t.Errorf("summary %q", s)
	}
	if strings.Count(live.String(), "refused request") != 1 {
		t.Errorf("live %q", live.String())
	}
}

func TestAllowRequestFlag(t *testing.T) {
	f := &runFlags{allowRequest: listFlag{"GET,HEAD github.com/**"}}
	p := &policy.Policy{}
	if err := f.apply(p); err != nil {
		t.Fatal(err)
	}
	if p.Network.Mode != policy.NetworkAllowlist || len(p.Network.Requests) != 1 || p.Network.Requests[0].Host != "github.com" {
		t.Errorf("network %+v", p.Network)
	}
	f = &runFlags{allowRequest: listFlag{"GET github.com/** programs=git-remote-https"}}
	p = &policy.Policy{}
	if err := f.apply(p); err != nil || len(p.Network.Requests) != 1 || !slices.Equal(p.Network.Requests[0].Programs, []string{"git-remote-https"}) {
		t.Errorf("programs form: %v %+v", err, p.Network)
	}
	f = &runFlags{allowRequest: listFlag{"get github.com/../x"}}
	if err := f.apply(&policy.Policy{}); err == nil || !strings.Contains(err.Error(), "--allow-request") {
		t.Errorf("bad rule: %v", err)
	}
}
