package server

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/server/store"
)

// consoleDo sends a request with the console's session cookie (if any)
// and the given headers; it returns the status.
func consoleDo(t *testing.T, method, url, cookie, body string, hdr map[string]string) (*http.Response, int) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: consoleCookie, Value: cookie})
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp, resp.StatusCode
}

func consoleLoginCookie(t *testing.T, ts *testServer, body string) string {
	t.Helper()
	resp, code := consoleDo(t, "POST", ts.tcp+"/ui/login", "", body, map[string]string{consoleHeader: "1", "Content-Type": "application/json"})
	if code != http.StatusOK {
		t.Fatalf("login %s: %d", body, code)
	}
	for _, c := range resp.Cookies() {
		if c.Name == consoleCookie {
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
				t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict", c)
			}
			return c.Value
		}
	}
	t.Fatal("login set no session cookie")
	return ""
}

// TestConsoleSession: a session acts as its key; without the console
// header, from another origin, after logout or the key's revocation it
// is refused; a login link works once and only from the local socket.
func TestConsoleSession(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	key := store.KeyPrefix + "t1-" + newID("")
	id, err := ts.store.AddKey(context.Background(), "t1", "test", key)
	if err != nil {
		t.Fatal(err)
	}
	ok := map[string]string{consoleHeader: "1"}
	if _, code := consoleDo(t, "POST", ts.tcp+"/ui/login", "", `{"key":"`+key+`"}`, nil); code != http.StatusForbidden {
		t.Errorf("login without the console header: %d, want 403", code)
	}
	if _, code := consoleDo(t, "POST", ts.tcp+"/ui/login", "", `{"key":"alk_wrong"}`, ok); code != http.StatusUnauthorized {
		t.Errorf("login with a bad key: %d, want 401", code)
	}
	sess := consoleLoginCookie(t, ts, `{"key":"`+key+`"}`)
	for _, c := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"with the header", ok, 200},
		{"without the header", nil, 403},
		{"from another origin", map[string]string{consoleHeader: "1", "Origin": "http://evil.example"}, 403},
		{"from its own origin", map[string]string{consoleHeader: "1", "Origin": ts.tcp}, 200},
	} {
		if _, code := consoleDo(t, "GET", ts.tcp+"/v1/sandboxes", sess, "", c.hdr); code != c.want {
			t.Errorf("list %s: %d, want %d", c.name, code, c.want)
		}
	}
	if _, code := consoleDo(t, "POST", ts.tcp+"/v1/sandboxes", sess, `{}`, map[string]string{"Content-Type": "application/json"}); code != 403 {
		t.Errorf("create without the header (CSRF): %d, want 403", code)
	}
	if err := ts.store.RevokeKey(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if _, code := consoleDo(t, "GET", ts.tcp+"/v1/sandboxes", sess, "", ok); code != 401 {
		t.Errorf("after the key's revocation: %d, want 401", code)
	}

	// A login link: only on the socket; once.
	if _, code := consoleDo(t, "POST", ts.tcp+"/ui/links", "", "", ok); code != 403 {
		t.Errorf("link over TCP: %d, want 403", code)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", ts.socket)
	}}}
	resp, err := hc.Post("http://x/ui/links", "application/json", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("link on the socket: %v %v", err, resp)
	}
	var link struct{ Token, Base string }
	json.NewDecoder(resp.Body).Decode(&link)
	resp.Body.Close()
	if link.Base != ts.tcp {
		t.Errorf("link base %q, want %q", link.Base, ts.tcp)
	}
	ls := consoleLoginCookie(t, ts, `{"link":"`+link.Token+`"}`)
	if _, code := consoleDo(t, "POST", ts.tcp+"/ui/login", "", `{"link":"`+link.Token+`"}`, ok); code != 401 {
		t.Errorf("the link a second time: %d, want 401", code)
	}
	if _, code := consoleDo(t, "POST", ts.tcp+"/ui/logout", ls, "", ok); code != 204 {
		t.Errorf("logout: %d", code)
	}
	if _, code := consoleDo(t, "GET", ts.tcp+"/v1/sandboxes", ls, "", ok); code != 401 {
		t.Errorf("after logout: %d, want 401", code)
	}
}

// TestConsolePageHeaders: the console's pages carry the strict CSP.
func TestConsolePageHeaders(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	for _, p := range []string{"/ui/", "/ui/app.js", "/ui/sandbox/x"} {
		resp, code := consoleDo(t, "GET", ts.tcp+p, "", "", nil)
		if code != 200 || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") ||
			resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: %d, CSP %q", p, code, resp.Header.Get("Content-Security-Policy"))
		}
	}
	if _, code := consoleDo(t, "GET", ts.tcp+"/ui/nope.js", "", "", nil); code != 404 {
		t.Errorf("missing asset: %d, want 404", code)
	}
}
