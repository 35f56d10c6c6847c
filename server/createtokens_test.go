package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

// call sends method path with bearer (if any) and body over real HTTP
// and returns the status and the answer's body.
func call(t *testing.T, base, method, path, bearer, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read answer: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// TestCreateAccessTokens: POST /v1/sandboxes with access_tokens answers
// the tokens of the scopes asked for (the same ones the access-tokens
// route hands out); each reaches what its scope reaches on that sandbox
// and nothing else; they are never in a get or a list; and a bad scope
// is a 400 naming it with nothing created.
func TestCreateAccessTokens(t *testing.T) {
	ts := newTestServer(t, nil)
	ctx := context.Background()
	alice := ts.key(t, "alice")
	ac := ts.tenantKey(t, alice)

	st, b := call(t, ts.tcp, "POST", "/v1/sandboxes", alice, `{"access_tokens": ["sandbox", "ports"]}`)
	var sb api.Sandbox
	if st != http.StatusCreated || json.Unmarshal(b, &sb) != nil {
		t.Fatalf("create with access_tokens: %d %s", st, b)
	}
	if len(sb.AccessTokens) != 2 || sb.AccessTokens[0].Scope != api.TokenScopeSandbox || sb.AccessTokens[1].Scope != api.TokenScopePorts {
		t.Fatalf("create's access_tokens: %+v, want sandbox then ports", sb.AccessTokens)
	}
	for _, tok := range sb.AccessTokens {
		if tok.Sandbox != sb.ID {
			t.Errorf("token of scope %s names sandbox %q, want %q", tok.Scope, tok.Sandbox, sb.ID)
		}
		want, err := ac.AccessToken(ctx, sb.ID, tok.Scope)
		if err != nil {
			t.Fatal(err)
		}
		if tok.Token != want {
			t.Errorf("token of scope %s: %q, the access-tokens route hands out %q", tok.Scope, tok.Token, want)
		}
	}
	sbTok, portsTok := sb.AccessTokens[0].Token, sb.AccessTokens[1].Token

	other, err := ac.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if other.AccessTokens != nil {
		t.Errorf("a create without access_tokens answered some: %+v", other.AccessTokens)
	}

	id := "/v1/sandboxes/" + sb.ID
	port := id + "/ports/8080/"
	for _, c := range []struct {
		what, method, path, bearer, body string
		reached                          bool
	}{
		{"sandbox token: get its sandbox", "GET", id, sbTok, "", true},
		{"sandbox token: exec", "POST", id + "/exec", sbTok, `{"args": ["true"]}`, true},
		{"sandbox token: stat a file", "GET", id + "/files/stat?path=/", sbTok, "", true},
		{"sandbox token: its ports", "GET", port, sbTok, "", true},
		{"sandbox token: delete its sandbox", "DELETE", id, sbTok, "", false},
		{"sandbox token: pause its sandbox", "POST", id + "/pause", sbTok, `{}`, false},
		{"sandbox token: more access tokens", "POST", id + "/access-tokens", sbTok, `{"scope": "sandbox"}`, false},
		{"sandbox token: list", "GET", "/v1/sandboxes", sbTok, "", false},
		{"sandbox token: create", "POST", "/v1/sandboxes", sbTok, `{}`, false},
		{"sandbox token: another sandbox", "GET", "/v1/sandboxes/" + other.ID, sbTok, "", false},
		{"sandbox token: another sandbox's exec", "POST", "/v1/sandboxes/" + other.ID + "/exec", sbTok, `{"args": ["true"]}`, false},
		{"ports token: its ports", "GET", port, portsTok, "", true},
		{"ports token: get its sandbox", "GET", id, portsTok, "", false},
		{"ports token: exec", "POST", id + "/exec", portsTok, `{"args": ["true"]}`, false},
		{"ports token: another sandbox's ports", "GET", "/v1/sandboxes/" + other.ID + "/ports/8080/", portsTok, "", false},
		{"no token: its ports (not public)", "GET", port, "", "", false},
	} {
		st, b := call(t, ts.tcp, c.method, c.path, c.bearer, c.body)
		refused := st == http.StatusUnauthorized || st == http.StatusForbidden
		switch {
		case c.reached && refused:
			t.Errorf("%s: %d %s, want it reached", c.what, st, b)
		case !c.reached && !refused:
			t.Errorf("%s: %d %s, want 401 or 403", c.what, st, b)
		}
	}

	// Never in a get or a list: neither the field nor a token.
	for _, p := range []string{id, "/v1/sandboxes"} {
		st, b := call(t, ts.tcp, "GET", p, alice, "")
		if st != http.StatusOK {
			t.Fatalf("GET %s: %d %s", p, st, b)
		}
		if bytes.Contains(b, []byte("access_tokens")) || bytes.Contains(b, []byte(sbTok)) || bytes.Contains(b, []byte(portsTok)) {
			t.Errorf("GET %s carries access tokens: %s", p, b)
		}
	}

	before, err := ac.List(ctx, client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	live := len(ts.fake.Live())
	for _, c := range []struct{ body, mention string }{
		{`{"access_tokens": ["nope"]}`, `access_tokens[0] "nope"`},
		{`{"access_tokens": ["sandbox", "admin"]}`, `access_tokens[1] "admin"`},
		{`{"access_tokens": [""]}`, `access_tokens[0] ""`},
		{`{"access_tokens": ["ports", "ports"]}`, "listed twice"},
		{`{"access_tokens": "sandbox"}`, "access_tokens"},
		{`{"access_tokens": [1]}`, "access_tokens"},
	} {
		st, b := call(t, ts.tcp, "POST", "/v1/sandboxes", alice, c.body)
		var eb api.ErrorBody
		if st != http.StatusBadRequest || json.Unmarshal(b, &eb) != nil || eb.Error.Code != api.CodeInvalid || !strings.Contains(eb.Error.Message, c.mention) {
			t.Errorf("create %s: %d %s, want 400 invalid mentioning %q", c.body, st, b, c.mention)
		}
	}
	after, err := ac.List(ctx, client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) || len(ts.fake.Live()) != live {
		t.Errorf("refused creates left sandboxes: %d listed (was %d), %d in the backend (was %d)", len(after), len(before), len(ts.fake.Live()), live)
	}
}
