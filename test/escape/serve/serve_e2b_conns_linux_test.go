package serve

// Issue 24: serve's E2B door has the connection bounds of the /v1 TCP
// listener (per client network, per tenant, a total that evicts
// anonymous connections first, a head deadline). Before, it had none: a
// flood of slow request heads from one network was held whole.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/internal/volume"
)

// e2bDoor starts the harness server with an E2B listener and extra
// flags; it returns the harness and the E2B listener's address.
func e2bDoor(t *testing.T, extra ...string) (*serveHarness, string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := ln.Addr().String()
	ln.Close()
	return startServe(t, append([]string{"--e2b-listen", addr}, extra...)...), addr
}

// doorConn is one connection to the E2B door from src.
type doorConn struct {
	c  net.Conn
	br *bufio.Reader
}

func dialDoor(t *testing.T, addr, src string) *doorConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial the E2B door from %s: %v", src, err)
	}
	t.Cleanup(func() { c.Close() })
	return &doorConn{c: c, br: bufio.NewReader(c)}
}

// slowHead starts a request head and leaves it unfinished.
func (dc *doorConn) slowHead() { io.WriteString(dc.c, "GET /sandboxes HTTP/1.1\r\nHost: x\r\n") }

// list sends E2B's GET /sandboxes with key (none: "") and returns the
// answer's status and body.
func (dc *doorConn) list(key string) (int, string, error) {
	req := "GET /sandboxes HTTP/1.1\r\nHost: x\r\n"
	if key != "" {
		req += "X-API-Key: " + key + "\r\n"
	}
	if _, err := io.WriteString(dc.c, req+"\r\n"); err != nil {
		return 0, "", err
	}
	return dc.answer()
}

func (dc *doorConn) answer() (int, string, error) {
	dc.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(dc.br, nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// slowloris sends a long head one byte per 50 ms until the server cuts
// the connection (or the head ends); it returns the bytes sent.
func (dc *doorConn) slowloris() (sent, of int) {
	head := "GET /sandboxes HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat("a", 30000)
	for ; sent < len(head); sent++ {
		if _, err := dc.c.Write([]byte{head[sent]}); err != nil {
			break
		}
		time.Sleep(50 * time.Millisecond) // the attacker's pace, not a synchronisation
	}
	return sent, len(head)
}

// TestE2BDoorConnLimits floods serve's E2B door: slow heads from one /24,
// a slowloris, and a tenant holding many keyed connections. Proof first,
// on a server whose bounds are off: the flood is held whole.
func TestE2BDoorConnLimits(t *testing.T) {
	testutil.RequireLinux(t)
	testutil.RequireRoot(t)
	if why := volume.Available(); why != "" {
		testutil.Skip(t, "E2B door: "+why)
	}
	// Proof: bounds off (as the door had none before), 40 slow heads of
	// one /24 are held and the 41st connection of that network is served.
	hp, paddr := e2bDoor(t, "--max-conns-per-prefix", "0", "--max-conns-per-tenant", "0", "--head-timeout", "10m")
	for i := 0; i < 40; i++ {
		dialDoor(t, paddr, fmt.Sprintf("127.0.0.%d", 10+i)).slowHead()
	}
	if st, body, err := dialDoor(t, paddr, "127.0.0.60").list(hp.keys["alice"][1]); err != nil || st != http.StatusOK {
		t.Fatalf("proof: the 41st connection of 127.0.0.0/24 on a door without bounds: %d %s %v", st, body, err)
	}
	t.Log("proof: with the bounds off the door holds 40 slow heads of 127.0.0.0/24 and serves a 41st connection")

	h, addr := e2bDoor(t, "--max-conns-per-prefix", "16", "--max-conns-per-tenant", "4", "--head-timeout", "2s")
	alice := h.keys["alice"][1]
	for i := 0; i < 16; i++ {
		dialDoor(t, addr, fmt.Sprintf("127.0.0.%d", 10+i)).slowHead()
	}
	st, body, err := dialDoor(t, addr, "127.0.0.60").answer()
	if err != nil || st != http.StatusTooManyRequests || !strings.Contains(body, "127.0.0.0/24") {
		t.Fatalf("the 17th connection of 127.0.0.0/24 on the E2B door: %d %s %v, want 429 naming the network", st, body, err)
	}
	// alice, from another network, is served during the flood; her
	// connections count per tenant: 4 held, the 5th refused.
	for i := 0; i < 4; i++ {
		if st, body, err := dialDoor(t, addr, fmt.Sprintf("127.0.6.%d", 1+i)).list(alice); err != nil || st != http.StatusOK {
			t.Fatalf("alice's E2B connection %d during the flood: %d %s %v", i+1, st, body, err)
		}
	}
	st, body, err = dialDoor(t, addr, "127.0.7.1").list(alice)
	if err != nil || st != http.StatusTooManyRequests || !strings.Contains(body, "tenant alice") {
		t.Fatalf("alice's 5th E2B connection: %d %s %v, want 429 naming tenant alice's limit", st, body, err)
	}
	// A slowloris is cut at the head deadline, however steadily it sends.
	sent, of := dialDoor(t, addr, "127.0.8.1").slowloris()
	if sent == of {
		t.Fatalf("the E2B door read a %d-byte head sent one byte per 50 ms to its end", sent)
	}
	t.Logf("E2B door: 17th connection of one /24 refused 429, alice's 5th connection refused 429, a slowloris cut after %d of %d bytes", sent, of)
}
