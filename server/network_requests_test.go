package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/errdefs"
)

// apiChanges returns the request rules of each "changed through the API"
// event of sandbox id, in order.
func apiChanges(t *testing.T, ts *testServer, id string) []string {
	t.Helper()
	evs, err := ts.local(t).Events(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.Message == "network rules changed through the API" {
			out = append(out, fmt.Sprint(e.Fields["requests"]))
		}
	}
	return out
}

// TestSetNetworkRequestRules: PUT .../network replaces request rules when
// it carries them, keeps them when it does not, and refuses a bad rule (or
// a host the sandbox's CA was not made for) with a 400 naming the rule,
// changing nothing.
func TestSetNetworkRequestRules(t *testing.T) {
	ts := newTestServer(t, nil)
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Policy: json.RawMessage(
		`{"network":{"mode":"allowlist","requests":[{"host":"api.test","methods":["GET"]}]}}`)})
	if err != nil {
		t.Fatal(err)
	}
	post := []api.RequestRule{{Host: "api.test", Methods: []string{"POST"}, Path: "/x", Programs: []string{"git-remote-https"}}}
	if err := c.SetNetwork(ctx, sb.ID, api.NetworkRequest{Mode: "allowlist", Requests: &post}); err != nil {
		t.Fatalf("PUT with request rules: %v", err)
	}
	if err := c.SetNetwork(ctx, sb.ID, api.NetworkRequest{Mode: "allowlist", Allow: []string{"example.com"}}); err != nil {
		t.Fatalf("PUT without request rules: %v", err)
	}
	for _, tc := range []struct {
		name  string
		req   api.NetworkRequest
		wants []string
	}{
		{"lower-case method", api.NetworkRequest{Mode: "allowlist", Requests: &[]api.RequestRule{post[0], {Host: "api.test", Methods: []string{"get"}}}},
			[]string{"requests[1]", "method \"get\""}},
		{"bad path", api.NetworkRequest{Mode: "allowlist", Requests: &[]api.RequestRule{{Host: "api.test", Path: "/a/../b"}}}, []string{"requests[0]", ".."}},
		{"bad program", api.NetworkRequest{Mode: "allowlist", Requests: &[]api.RequestRule{{Host: "api.test", Programs: []string{"bin/git"}}}}, []string{"requests[0]", "program"}},
		{"address host", api.NetworkRequest{Mode: "allowlist", Requests: &[]api.RequestRule{{Host: "api.test"}, {Host: "[::1"}}}, []string{"requests[1]"}},
		{"host not in the CA", api.NetworkRequest{Mode: "allowlist", Requests: &[]api.RequestRule{{Host: "other.test"}}}, []string{"other.test", "new sandbox"}},
		{"good rules, bad mode", api.NetworkRequest{Mode: "wide", Requests: &post}, []string{"network mode"}},
	} {
		err := c.SetNetwork(ctx, sb.ID, tc.req)
		if !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%s: got %v, want 400", tc.name, err)
			continue
		}
		for _, w := range tc.wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v does not say %q", tc.name, err, w)
			}
		}
	}
	got := apiChanges(t, ts, sb.ID)
	want := "[POST api.test/x (programs git-remote-https)]"
	if len(got) != 2 || got[0] != want || got[1] != want {
		t.Errorf("changes %q, want two with %s (the second kept them; refusals changed nothing)", got, want)
	}
	// Removing them is an empty list, not an absent one.
	if err := c.SetNetwork(ctx, sb.ID, api.NetworkRequest{Mode: "allowlist", Requests: &[]api.RequestRule{}}); err != nil {
		t.Fatal(err)
	}
	if got := apiChanges(t, ts, sb.ID); len(got) != 3 || got[2] != "[]" {
		t.Errorf("after removing: %q", got)
	}
}
