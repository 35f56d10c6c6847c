package server

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/server/store"
)

// rawDo sends a raw request over the trusted socket.
func rawDo(t *testing.T, ts *testServer, method, path, ctype string, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", ts.socket)
	}}}
	req, err := http.NewRequest(method, "http://airlock"+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	ctx := context.Background()
	c := ts.local(t)
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ts.fake.AddSymlinkIn(t, sb.ID, "/data/out", "/etc")
	created := ts.fake.Created.Load()
	rows := func() int {
		l, err := ts.store.ListSandboxes(ctx, store.ListFilter{Tenant: store.LocalTenant})
		if err != nil {
			t.Fatal(err)
		}
		return len(l)
	}
	before := rows()

	hugeArgv, _ := json.Marshal(api.ExecRequest{Args: make([]string, maxArgs+1)})
	bigArg, _ := json.Marshal(api.ExecRequest{Args: []string{"echo", strings.Repeat("a", maxArgvBytes)}})
	sbp := "/v1/sandboxes/" + sb.ID
	cases := []struct {
		name, method, path, ctype, body string
		status                          int
		code                            string
	}{
		{"malformed JSON", "POST", "/v1/sandboxes", "application/json", `{"backend": "fake",`, 400, "invalid"},
		{"not an object", "POST", "/v1/sandboxes", "application/json", `[1,2]`, 400, "invalid"},
		{"empty body", "POST", "/v1/sandboxes", "application/json", ``, 400, "invalid"},
		{"trailing data", "POST", "/v1/sandboxes", "application/json", `{} {}`, 400, "invalid"},
		{"unknown field", "POST", "/v1/sandboxes", "application/json", `{"backend":"fake","bogus":1}`, 400, "invalid"},
		{"unknown policy field", "POST", "/v1/sandboxes", "application/json", `{"policy":{"filesystem":{"bogus":true}}}`, 400, "invalid"},
		{"wrong type", "POST", "/v1/sandboxes", "application/json", `{"timeout": 5}`, 400, "invalid"},
		{"bad timeout", "POST", "/v1/sandboxes", "application/json", `{"timeout": "forever"}`, 400, "invalid"},
		{"too long timeout", "POST", "/v1/sandboxes", "application/json", `{"timeout": "1000h"}`, 400, "invalid"},
		{"wrong content type", "POST", "/v1/sandboxes", "text/plain", `{}`, 415, "unsupported_media_type"},
		{"oversized body", "POST", "/v1/sandboxes", "application/json", `{"labels":{"a":"` + strings.Repeat("x", maxJSONBody) + `"}}`, 413, "too_large"},
		{"unknown backend", "POST", "/v1/sandboxes", "application/json", `{"backend":"nope"}`, 400, "invalid"},
		{"unknown profile", "POST", "/v1/sandboxes", "application/json", `{"profile":"nope"}`, 400, "invalid"},
		{"bad label", "POST", "/v1/sandboxes", "application/json", `{"labels":{"":"x"}}`, 400, "invalid"},
		{"bad env", "POST", "/v1/sandboxes", "application/json", `{"env":{"A=B":"x"}}`, 400, "invalid"},
		{"image path", "POST", "/v1/sandboxes", "application/json", `{"image":"../../etc"}`, 400, "invalid"},
		{"empty argv", "POST", sbp + "/exec", "application/json", `{"args":[]}`, 400, "invalid"},
		{"huge argv", "POST", sbp + "/exec", "application/json", string(hugeArgv), 400, "invalid"},
		{"huge argument", "POST", sbp + "/exec", "application/json", string(bigArg), 400, "invalid"},
		{"NUL in argv", "POST", sbp + "/exec", "application/json", `{"args":["echo","a\u0000b"]}`, 400, "invalid"},
		{"bad encoding", "POST", sbp + "/exec", "application/json", `{"args":["true"],"encoding":"rot13"}`, 400, "invalid"},
		{"relative dir", "POST", sbp + "/exec", "application/json", `{"args":["true"],"dir":"tmp"}`, 400, "invalid"},
		{"traversal read", "GET", sbp + "/files?path=/tmp/../../etc/passwd", "", "", 400, "invalid"},
		{"traversal write", "PUT", sbp + "/files?path=/../escape", "application/octet-stream", "x", 400, "invalid"},
		{"relative path", "GET", sbp + "/files?path=etc/passwd", "", "", 400, "invalid"},
		{"NUL path", "GET", sbp + "/files/stat?path=/etc%00/passwd", "", "", 400, "invalid"},
		{"empty path", "GET", sbp + "/files/list", "", "", 400, "invalid"},
		{"traversal rename", "POST", sbp + "/files/rename", "application/json", `{"from":"/tmp/a","to":"/tmp/../../x"}`, 400, "invalid"},
		{"symlink out (write)", "PUT", sbp + "/files?path=/data/out/evil", "application/octet-stream", "x", 403, "permission_denied"},
		{"symlink out (read)", "GET", sbp + "/files?path=/data/out/passwd", "", "", 403, "permission_denied"},
		{"remove root", "DELETE", sbp + "/files?path=/&recursive=true", "", "", 400, "invalid"},
		{"bad mode", "PUT", sbp + "/files?path=/tmp/f&mode=999", "application/octet-stream", "x", 400, "invalid"},
		{"unknown sandbox", "POST", "/v1/sandboxes/sb-nope/exec", "application/json", `{"args":["true"]}`, 404, "not_found"},
		{"unknown process", "GET", sbp + "/processes/p99", "", "", 404, "not_found"},
		{"bad signal", "POST", sbp + "/processes/p1/signal", "application/json", `{"signal":1}`, 404, "not_found"},
		{"unknown route", "GET", "/v1/nothing", "", "", 404, "not_found"},
		{"wrong method", "PUT", "/v1/sandboxes", "", "", 405, "method_not_allowed"},
		{"bad network mode", "PUT", sbp + "/network", "application/json", `{"mode":"wide-open"}`, 400, "invalid"},
		{"bad state filter", "GET", "/v1/sandboxes?state=zombie", "", "", 400, "invalid"},
		{"too many label filters", "GET", "/v1/sandboxes?" + strings.Repeat("label=a=b&", maxLabels+1), "", "", 400, "invalid"},
		{"bad events cursor", "GET", sbp + "/events?after=-1", "", "", 400, "invalid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := rawDo(t, ts, tc.method, tc.path, tc.ctype, strings.NewReader(tc.body))
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("content type %q", ct)
			}
			var eb api.ErrorBody
			dec := json.NewDecoder(strings.NewReader(string(body)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&eb); err != nil || eb.Error.Code != tc.code || eb.Error.Message == "" {
				t.Fatalf("error body %s (%v), want code %q", body, err, tc.code)
			}
		})
	}
	if n := ts.fake.Created.Load(); n != created {
		t.Errorf("bad requests created %d sandboxes", n-created)
	}
	if n := rows(); n != before {
		t.Errorf("bad requests added %d store rows", n-before)
	}
	if live := ts.fake.Live(); len(live) != 1 {
		t.Errorf("live sandboxes %v, want only %s", live, sb.ID)
	}
	// A policy an API key may not ask for: 403, nothing created.
	k := ts.tenant(t, "mallory")
	for _, pol := range []string{
		`{"filesystem":{"read_write":["/home"]}}`,
		`{"filesystem":{"rootfs":"/"}}`,
		`{"secrets":[{"name":"X","from_env":"HOME","hosts":["example.com"]}]}`,
		`{"process":{"env_allow":["HOME"]}}`,
		`{"audit":{"file":"/etc/cron.d/x"}}`,
	} {
		_, err := k.Create(ctx, api.CreateSandboxRequest{Policy: json.RawMessage(pol)})
		if err == nil || !strings.Contains(err.Error(), "403") {
			t.Errorf("policy %s over an API key: want 403, got %v", pol, err)
		}
	}
	if n := ts.fake.Created.Load(); n != created {
		t.Errorf("refused policies created %d sandboxes", n-created)
	}
}

func rawDoAccept(t *testing.T, ts *testServer, path, accept string) (*http.Response, []byte) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", ts.socket)
	}}}
	req, _ := http.NewRequest("GET", "http://airlock"+path, nil)
	req.Header.Set("Accept", accept)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}
