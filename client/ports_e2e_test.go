package client_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

// buildPortServer builds testdata/portsrv (the app the port tests run
// inside a sandbox), static, once per test binary.
func buildPortServer(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "portsrv")
	cmd := exec.Command("go", "build", "-o", bin, "./testdata/portsrv")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build portsrv: %v\n%s", err, out)
	}
	return bin
}

// startPortServer copies portsrv into sandbox id and runs it on port,
// returning once it answers through the port route.
func startPortServer(t testing.TB, c *client.Client, id, bin string, port int) {
	t.Helper()
	ctx := context.Background()
	f, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := c.WriteFile(ctx, id, "/tmp/portsrv", f, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, id, client.ExecOptions{Args: []string{"/tmp/portsrv", fmt.Sprint(port)}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the app inside listens", func() bool {
		resp, err := keyed(c, "GET", c.URL(id, port)+"hello", "")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// keyed sends a request with c's key (key "" in the header: none).
func keyed(c *client.Client, method, url, host string) (*http.Response, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return nil, err
	}
	if k := client.KeyForTest(c); k != "" {
		req.Header.Set("Authorization", "Bearer "+k)
	}
	if host != "" {
		req.Host = host
	}
	return c.HTTPClient().Do(req)
}

func get(t testing.TB, hc *http.Client, url, host string, hdr http.Header) (int, string, *http.Response) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp
}

func newJar(t testing.TB) http.CookieJar {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return jar
}

func wsEcho(t testing.TB, url string, hdr http.Header, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatalf("websocket %s: %v", url, err)
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	_, b, err := ws.Read(ctx)
	if err != nil || string(b) != "echo: "+msg {
		t.Fatalf("websocket echo: %q, %v", b, err)
	}
	ws.Close(websocket.StatusNormalClosure, "")
}

// TestE2EPorts: an HTTP server and a WebSocket echo inside a native
// sandbox, reached through the path route, the preview host and
// port-forward; tokens and tenants decide who gets there.
func TestE2EPorts(t *testing.T) {
	requireNative(t)
	bin := buildPortServer(t)
	addr := freePort(t)
	s, err := startServe(t.TempDir(), "--backend", "native", "--listen", addr, "--preview-domain", "preview.test")
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	ctx := context.Background()
	aliceKey := s.newKey(t, "alice")
	alice, _ := client.New(s.tcp, client.WithAPIKey(aliceKey))
	bob, _ := client.New(s.tcp, client.WithAPIKey(s.newKey(t, "bob")))
	anon := &http.Client{}
	sb, err := alice.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Delete(ctx, sb.ID)
	startPortServer(t, alice, sb.ID, bin, 8000)
	base := alice.URL(sb.ID, 8000)
	auth := http.Header{"Authorization": {"Bearer " + aliceKey}}

	t.Run("path route with the key", func(t *testing.T) {
		code, body, _ := get(t, anon, base+"hello?a=1", "", auth)
		want := "hello from inside\npath=/hello\nquery=a=1\nprefix=/v1/sandboxes/" + sb.ID + "/ports/8000\nauthorization=\"\"\n"
		if code != 200 || !strings.HasPrefix(body, want) {
			t.Fatalf("%d %q, want prefix %q", code, body, want)
		}
		wsEcho(t, strings.Replace(base, "http", "ws", 1)+"ws", auth, "through the route")
	})
	t.Run("the app never sees the caller's credentials", func(t *testing.T) {
		// Unconfined first: the same app on the host, asked directly,
		// shows what a client sends it (a key and a token cookie).
		addr := freePort(t)
		_, port, _ := strings.Cut(addr, ":")
		host := exec.Command(bin, port)
		if err := host.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { host.Process.Kill(); host.Wait() }()
		hdr := http.Header{"Authorization": {"Bearer " + aliceKey}, "Cookie": {"airlock_port_token=secret; app=1"}}
		var body string
		eventually(t, "the host's portsrv", func() bool {
			req, _ := http.NewRequest("GET", "http://"+addr+"/hello", nil)
			req.Header = hdr.Clone()
			resp, err := anon.Do(req)
			if err != nil {
				return false
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			return true
		})
		if !strings.Contains(body, aliceKey) || !strings.Contains(body, "airlock_port_token=secret") {
			t.Fatalf("the direct app did not see the credentials: %q", body)
		}
		// Through the route: the key and the token cookie are gone, the
		// app's own cookie stays.
		_, body, _ = get(t, anon, base+"hello", "", hdr)
		if strings.Contains(body, aliceKey) || strings.Contains(body, "secret") || !strings.Contains(body, `cookie="app=1"`) {
			t.Fatalf("through the route the app saw: %q", body)
		}
	})
	t.Run("the app cannot plant or shadow airlock's cookie", func(t *testing.T) {
		// issue 24 item 9. Unconfined first: the same app on the host
		// sets whatever cookie it is asked to.
		addr := freePort(t)
		_, port, _ := strings.Cut(addr, ":")
		host := exec.Command(bin, port)
		if err := host.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { host.Process.Kill(); host.Wait() }()
		plant := "setcookie?c=" + url.QueryEscape("airlock_port_token=evil; Path=/v1/sandboxes/other/ports/8000/") +
			"&c=" + url.QueryEscape("__Host-Airlock_x=1; Path=/") + "&c=" + url.QueryEscape("app=2; Path=/")
		var direct []string
		eventually(t, "the host's portsrv", func() bool {
			resp, err := anon.Get("http://" + addr + "/" + plant)
			if err != nil {
				return false
			}
			resp.Body.Close()
			direct = resp.Header.Values("Set-Cookie")
			return true
		})
		if len(direct) != 3 {
			t.Fatalf("the direct app's cookies: %q", direct)
		}
		_, _, resp := get(t, anon, base+plant, "", auth)
		if got := resp.Header.Values("Set-Cookie"); len(got) != 1 || got[0] != "app=2; Path=/" {
			t.Errorf("through the route the app set: %q, want only app=2", got)
		}
		// A cookie of the same name planted by script for a longer path
		// comes first: the genuine token still lets its holder in.
		tok, err := alice.PortToken(ctx, sb.ID, 8000, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		hdr := http.Header{"Cookie": {"airlock_port_token=evil; airlock_port_token=" + tok.Token}}
		if code, body, _ := get(t, anon, base+"hello", "", hdr); code != 200 || strings.Contains(body, tok.Token) {
			t.Errorf("a shadowing cookie before the genuine one: %d %q", code, body)
		}
	})
	t.Run("the port root without a slash", func(t *testing.T) {
		noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		code, _, resp := get(t, noRedirect, strings.TrimSuffix(base, "/"), "", auth)
		if code/100 != 3 || !strings.HasSuffix(resp.Header.Get("Location"), "/ports/8000/") {
			t.Fatalf("%d %v", code, resp.Header)
		}
	})
	t.Run("no key, no token", func(t *testing.T) {
		if code, body, _ := get(t, anon, base+"hello", "", nil); code != 401 {
			t.Fatalf("%d %s", code, body)
		}
	})
	t.Run("nothing listens", func(t *testing.T) {
		if code, body, _ := get(t, anon, alice.URL(sb.ID, 8001)+"hello", "", auth); code != 502 || !strings.Contains(body, "8001") {
			t.Fatalf("%d %s", code, body)
		}
	})
	t.Run("token", func(t *testing.T) {
		tok, err := alice.PortToken(ctx, sb.ID, 8000, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		jar := newJar(t)
		browser := &http.Client{Jar: jar}
		u := strings.Replace(tok.URL, "/?token=", "/hello?token=", 1)
		code, body, _ := get(t, browser, u, "", nil)
		if code != 200 || !strings.Contains(body, "query=\n") || !strings.Contains(body, "cookie=\"\"") {
			t.Fatalf("token in the query: %d %q (the app must see neither the token nor the cookie)", code, body)
		}
		// The cookie set on first use carries it from now on.
		if code, body, _ := get(t, browser, base+"hello", "", nil); code != 200 {
			t.Fatalf("token in the cookie: %d %s", code, body)
		}
		wsEcho(t, strings.Replace(base, "http", "ws", 1)+"ws?token="+tok.Token, nil, "with a token")
		// Tampered, or for another port: refused.
		bad := tok.Token[:len(tok.Token)-2] + "xx"
		if code, _, _ := get(t, anon, base+"hello?token="+bad, "", nil); code != 401 {
			t.Fatalf("tampered token: %d", code)
		}
		other, err := alice.PortToken(ctx, sb.ID, 9000, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if code, _, _ := get(t, anon, base+"hello?token="+other.Token, "", nil); code != 403 {
			t.Fatalf("another port's token: %d", code)
		}
		// Expired: a 1s token works, then is refused.
		short, err := alice.PortToken(ctx, sb.ID, 8000, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the short token expires", func() bool {
			code, _, _ := get(t, anon, base+"hello?token="+short.Token, "", nil)
			return code == 401
		})
	})
	t.Run("preview host", func(t *testing.T) {
		host := "8000-" + sb.ID + ".preview.test"
		code, body, _ := get(t, anon, s.tcp+"/hello", host, auth)
		if code != 200 || !strings.Contains(body, "path=/hello\n") || !strings.Contains(body, "prefix=\n") || !strings.Contains(body, "host="+host) {
			t.Fatalf("%d %q", code, body)
		}
		tok, _ := alice.PortToken(ctx, sb.ID, 8000, time.Minute)
		if !strings.HasPrefix(tok.PreviewURL, "http://"+host+"/?token=") {
			t.Fatalf("preview URL %q", tok.PreviewURL)
		}
		if code, body, _ := get(t, anon, s.tcp+"/hello?token="+tok.Token, host, nil); code != 200 {
			t.Fatalf("preview with a token: %d %s", code, body)
		}
		if code, _, _ := get(t, anon, s.tcp+"/hello", host, nil); code != 401 {
			t.Fatalf("preview without credentials: %d", code)
		}
	})
	t.Run("other tenant", func(t *testing.T) {
		bauth := http.Header{"Authorization": {"Bearer " + client.KeyForTest(bob)}}
		if code, _, _ := get(t, anon, base+"hello", "", bauth); code != 404 {
			t.Fatalf("bob's key on alice's port: %d", code)
		}
		if code, _, _ := get(t, anon, s.tcp+"/hello", "8000-"+sb.ID+".preview.test", bauth); code != 404 {
			t.Fatalf("bob's key on alice's preview host: %d", code)
		}
		if _, err := bob.PortToken(ctx, sb.ID, 8000, time.Minute); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Fatalf("bob mints a token for alice's sandbox: %v", err)
		}
		if _, err := bob.DialPort(ctx, sb.ID, 8000); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Fatalf("bob dials alice's port: %v", err)
		}
		own, err := bob.Create(ctx, api.CreateSandboxRequest{})
		if err != nil {
			t.Fatal(err)
		}
		defer bob.Delete(ctx, own.ID)
		btok, err := bob.PortToken(ctx, own.ID, 8000, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if code, _, _ := get(t, anon, base+"hello?token="+btok.Token, "", nil); code != 403 {
			t.Fatalf("bob's token on alice's sandbox: %d", code)
		}
	})
	t.Run("port-forward", func(t *testing.T) {
		cmd := exec.Command(airlockBin, "sandbox", "--host", s.tcp, "port-forward", sb.ID, "0:8000")
		cmd.Env = append(os.Environ(), client.EnvAPIKey+"="+aliceKey)
		stderr, _ := cmd.StderrPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
		line, err := bufio.NewReader(stderr).ReadString('\n')
		if err != nil {
			t.Fatalf("port-forward: %v", err)
		}
		local, _, ok := strings.Cut(strings.TrimPrefix(line, "forwarding "), " ")
		if !ok {
			t.Fatalf("port-forward said %q", line)
		}
		code, body, _ := get(t, anon, "http://"+local+"/hello", "", nil)
		if code != 200 || !strings.HasPrefix(body, "hello from inside\npath=/hello\n") {
			t.Fatalf("through port-forward: %d %q", code, body)
		}
		wsEcho(t, "ws://"+local+"/ws", nil, "through port-forward")
	})
}
