package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
)

// rawConn is one real TCP connection to the test server from src.
type rawConn struct {
	c  net.Conn
	br *bufio.Reader
}

func dialFrom(t *testing.T, addr, src string) *rawConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", src, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{c: c, br: bufio.NewReader(c)}
}

// get sends GET path with key (if any) and reads the answer.
func (rc *rawConn) get(path, key string) (int, api.ErrorInfo, error) {
	req := "GET " + path + " HTTP/1.1\r\nHost: x\r\n"
	if key != "" {
		req += "Authorization: Bearer " + key + "\r\n"
	}
	if _, err := io.WriteString(rc.c, req+"\r\n"); err != nil {
		return 0, api.ErrorInfo{}, err
	}
	return rc.answer()
}

func (rc *rawConn) answer() (int, api.ErrorInfo, error) {
	rc.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		return 0, api.ErrorInfo{}, err
	}
	defer resp.Body.Close()
	var eb api.ErrorBody
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 400 {
		json.Unmarshal(b, &eb)
	}
	return resp.StatusCode, eb.Error, nil
}

// closed reports whether the server closed rc (EOF or reset).
func (rc *rawConn) closed() bool {
	rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := rc.br.ReadByte()
	return err != nil
}

// TestConnLimitsByPrefixTenantAndTotal: connections are counted per /24
// (many addresses of one network share its limit), per tenant once a
// request authenticates (429 naming the limit), and at the total limit a
// new connection evicts the oldest anonymous one instead of being refused,
// so a flood of unauthenticated connections from many networks never keeps
// a tenant out. Real TCP connections from real loopback addresses.
func TestConnLimitsByPrefixTenantAndTotal(t *testing.T) {
	ts := newTestServer(t, func(c *Config) {
		c.TCPLimits = ConnLimits{PerPrefix: 8, PerTenant: 4, Total: 24}
		c.HeadTimeout = 10 * time.Minute // the held heads stay until this test closes them
	})
	addr := strings.TrimPrefix(ts.tcp, "http://")
	alice, bob := ts.key(t, "alice"), ts.key(t, "bob")

	// 8 slow heads from 8 addresses of 127.0.0.0/24: the 9th address of
	// that network is refused with 429, another network is not.
	var flood []*rawConn
	for i := 0; i < 8; i++ {
		rc := dialFrom(t, addr, fmt.Sprintf("127.0.0.%d", 10+i))
		io.WriteString(rc.c, "GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\n")
		flood = append(flood, rc)
	}
	ninth := dialFrom(t, addr, "127.0.0.200")
	st, ei, err := ninth.answer()
	if err != nil || st != http.StatusTooManyRequests || ei.Code != api.CodeLimitExceeded || !strings.Contains(ei.Message, "127.0.0.0/24") {
		t.Fatalf("9th connection of 127.0.0.0/24: %d %+v %v, want 429 limit_exceeded naming the network", st, ei, err)
	}
	if st, _, err := dialFrom(t, addr, "127.0.1.1").get("/v1/sandboxes", alice); err != nil || st != http.StatusOK {
		t.Fatalf("alice from 127.0.1.0/24 during the flood: %d %v", st, err)
	}

	// alice may hold 4 connections (the one above is kept alive): her
	// 5th request on a new connection gets 429 naming the tenant limit,
	// and is closed.
	var mine []*rawConn
	for i := 0; i < 3; i++ {
		rc := dialFrom(t, addr, fmt.Sprintf("127.0.2.%d", 1+i))
		if st, _, err := rc.get("/v1/sandboxes", alice); err != nil || st != http.StatusOK {
			t.Fatalf("alice's connection %d: %d %v", i+2, st, err)
		}
		mine = append(mine, rc)
	}
	fifth := dialFrom(t, addr, "127.0.2.9")
	st, ei, err = fifth.get("/v1/sandboxes", alice)
	if err != nil || st != http.StatusTooManyRequests || !strings.Contains(ei.Message, "tenant alice") || !strings.Contains(ei.Message, "limit 4") {
		t.Fatalf("alice's 5th connection: %d %+v %v, want 429 naming tenant alice's limit 4", st, ei, err)
	}
	if !fifth.closed() {
		t.Fatal("the connection over the tenant limit stayed open")
	}

	// Fill the total (24) with slow heads from other networks: 8 + 4 (alice)
	// + 12 anonymous = 24.
	for i := 0; i < 12; i++ {
		rc := dialFrom(t, addr, fmt.Sprintf("127.0.%d.%d", 3+i/6, 1+i%6))
		io.WriteString(rc.c, "GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\n")
		flood = append(flood, rc)
	}
	// bob still gets in: the oldest anonymous connection makes room.
	for i := 0; i < 3; i++ {
		rc := dialFrom(t, addr, fmt.Sprintf("127.0.9.%d", 1+i))
		if st, ei, err := rc.get("/v1/sandboxes", bob); err != nil || st != http.StatusOK {
			t.Fatalf("bob's connection %d at the total limit: %d %+v %v", i, st, ei, err)
		}
	}
	for i := 0; i < 3; i++ {
		if !flood[i].closed() {
			t.Errorf("the %d-th oldest anonymous connection was not evicted", i+1)
		}
	}
	// alice's connections were not evicted: they are a tenant's.
	for i, rc := range mine {
		if st, _, err := rc.get("/v1/sandboxes", alice); err != nil || st != http.StatusOK {
			t.Errorf("alice's kept connection %d after the evictions: %d %v", i, st, err)
		}
	}
}

// TestConnLimitsAllTenantsRefuse503: when every connection held is a
// tenant's, a new one is refused with 503 naming the total.
func TestConnLimitsAllTenantsRefuse503(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.TCPLimits = ConnLimits{PerPrefix: 8, PerTenant: 4, Total: 2} })
	addr := strings.TrimPrefix(ts.tcp, "http://")
	alice := ts.key(t, "alice")
	for i := 0; i < 2; i++ {
		if st, _, err := dialFrom(t, addr, fmt.Sprintf("127.0.0.%d", 1+i)).get("/v1/sandboxes", alice); err != nil || st != http.StatusOK {
			t.Fatalf("connection %d: %d %v", i, st, err)
		}
	}
	st, ei, err := dialFrom(t, addr, "127.0.5.1").answer()
	if err != nil || st != http.StatusServiceUnavailable || ei.Code != api.CodeUnavailable || !strings.Contains(ei.Message, "(2)") {
		t.Fatalf("3rd connection: %d %+v %v, want 503 unavailable naming the total 2", st, ei, err)
	}
}

// TestHeadTimeoutCutsSlowloris: a client sending its request head one byte
// at a time loses the connection at the head deadline, however steadily it
// sends.
func TestHeadTimeoutCutsSlowloris(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.HeadTimeout = 300 * time.Millisecond })
	rc := dialFrom(t, strings.TrimPrefix(ts.tcp, "http://"), "127.0.0.1")
	head := "GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat("a", 100000)
	sent := 0
	for ; sent < len(head); sent++ {
		if _, err := rc.c.Write([]byte{head[sent]}); err != nil {
			break
		}
		time.Sleep(20 * time.Millisecond) // the attacker's pace, not a synchronisation
	}
	if sent == len(head) {
		t.Fatalf("the server read a %d-byte head sent one byte per 20 ms to its end", sent)
	}
	t.Logf("connection cut after %d bytes", sent)
}

// send sends method path with key and a JSON body on rc, and returns the
// answer's status and body.
func (rc *rawConn) send(method, path, key, body string) (int, []byte, error) {
	req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", method, path, key, len(body), body)
	if _, err := io.WriteString(rc.c, req); err != nil {
		return 0, nil, err
	}
	rc.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// TestPortTokenConnIsTenants: a request carrying a port token (no API
// key) makes its connection the sandbox's tenant's, as a key would: it
// counts against the tenant's connection limit, and at the total limit
// the anonymous connections are evicted before it.
func TestPortTokenConnIsTenants(t *testing.T) {
	ts := newTestServer(t, func(c *Config) {
		c.TCPLimits = ConnLimits{PerTenant: 3, Total: 5}
		c.HeadTimeout = 10 * time.Minute // the held heads stay until this test closes them
	})
	addr := strings.TrimPrefix(ts.tcp, "http://")
	alice := ts.key(t, "alice")
	// alice's own connection (kept): she creates a sandbox and a port token.
	own := dialFrom(t, addr, "127.0.0.1")
	st, b, err := own.send("POST", "/v1/sandboxes", alice, "{}")
	var sb api.Sandbox
	if err != nil || st != http.StatusCreated || json.Unmarshal(b, &sb) != nil {
		t.Fatalf("create: %d %s %v", st, b, err)
	}
	st, b, err = own.send("POST", "/v1/sandboxes/"+sb.ID+"/port-tokens", alice, `{"port": 8080}`)
	var pt api.PortToken
	if err != nil || st != http.StatusCreated && st != http.StatusOK || json.Unmarshal(b, &pt) != nil || pt.Token == "" {
		t.Fatalf("port token: %d %s %v", st, b, err)
	}
	portPath := "/v1/sandboxes/" + sb.ID + "/ports/8080/?token=" + pt.Token
	viaToken := dialFrom(t, addr, "127.0.1.1")
	if st, ei, err := viaToken.get(portPath, ""); err != nil || st == http.StatusUnauthorized || st == http.StatusForbidden {
		t.Fatalf("the port request with its token: %d %+v %v", st, ei, err)
	}
	// alice holds 2 (her own, the token's): one more with her key, and
	// the next is over her limit of 3.
	if st, _, err := dialFrom(t, addr, "127.0.2.1").get("/v1/sandboxes", alice); err != nil || st != http.StatusOK {
		t.Fatalf("alice's third connection: %d %v", st, err)
	}
	st, ei, err := dialFrom(t, addr, "127.0.2.2").get("/v1/sandboxes", alice)
	if err != nil || st != http.StatusTooManyRequests || !strings.Contains(ei.Message, "tenant alice") {
		t.Fatalf("alice's fourth connection (the port token's counted): %d %+v %v, want 429 naming tenant alice", st, ei, err)
	}
	// The total (5): alice's 3 and two anonymous slow heads; a new
	// connection evicts the oldest anonymous one, not the token's.
	var anon []*rawConn
	for i := 0; i < 2; i++ {
		rc := dialFrom(t, addr, fmt.Sprintf("127.0.3.%d", 1+i))
		io.WriteString(rc.c, "GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\n")
		anon = append(anon, rc)
	}
	if st, _, err := dialFrom(t, addr, "127.0.4.1").get("/v1/sandboxes", ts.key(t, "bob")); err != nil || st != http.StatusOK {
		t.Fatalf("bob at the total limit: %d %v", st, err)
	}
	if !anon[0].closed() {
		t.Error("the oldest anonymous connection was not evicted")
	}
	if st, ei, err := viaToken.get(portPath, ""); err != nil || st == http.StatusUnauthorized || st == http.StatusForbidden {
		t.Errorf("the port token's connection after the eviction: %d %+v %v", st, ei, err)
	}
}
