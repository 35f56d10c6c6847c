package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

// A PTY session ends when its input does (CloseWrite: the process reads
// end of file) and when its context does (the process group is killed).
func TestPTYEndOfInputAndCancel(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.PTY(ctx, sb.ID, client.PTYOptions{Args: []string{"cat"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if err := p.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(p)
	ex, err := p.Wait(ctx)
	if err != nil || ex.Code != 0 || string(out) != "hello\n" {
		t.Fatalf("cat after end of input: %+v %v, output %q", ex, err, out)
	}
	p.Close()

	cctx, cancel := context.WithCancel(ctx)
	p, err = c.PTY(cctx, sb.ID, client.PTYOptions{Args: []string{"sleep", "100"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	kills := ts.fake.Kills.Load()
	eventually(t, "the sleep to start", func() bool { return ts.fake.Processes() > 0 })
	cancel()
	go io.Copy(io.Discard, p)
	wctx, wcancel := context.WithTimeout(ctx, time.Minute) // a hang guard, not a timing
	defer wcancel()
	if _, err := p.Wait(wctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after the session's context ended: %v", err)
	}
	eventually(t, "the server to kill the process group", func() bool { return ts.fake.Kills.Load() > kills })
}

// A PTY session whose start message is wrong (not text, not JSON, or a
// request exec refuses) gets an "error" message with the error's code,
// then a policy-violation close.
func TestPTYBadStartMessage(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", ts.socket)
	}}}
	for name, m := range map[string]struct {
		typ  websocket.MessageType
		data string
	}{
		"binary":   {websocket.MessageBinary, `{"args":["sh"]}`},
		"not json": {websocket.MessageText, `{"args":`},
		"no args":  {websocket.MessageText, `{"args":[]}`},
	} {
		conn, _, err := websocket.Dial(ctx, "ws://airlock/v1/sandboxes/"+sb.ID+"/pty", &websocket.DialOptions{HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.Write(ctx, m.typ, []byte(m.data)); err != nil {
			t.Fatal(err)
		}
		typ, data, err := conn.Read(ctx)
		var got api.PTYMessage
		if err != nil || typ != websocket.MessageText || json.Unmarshal(data, &got) != nil ||
			got.Type != "error" || got.Error == nil || got.Error.Code != api.CodeInvalid {
			t.Errorf("%s: want an error message with code %q, got %v %q (%v)", name, api.CodeInvalid, typ, data, err)
		}
		if _, _, err := conn.Read(ctx); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
			t.Errorf("%s: want a policy-violation close, got %v", name, err)
		}
		conn.CloseNow()
	}
}
