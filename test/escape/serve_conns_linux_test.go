package escape

// Issue 24, finding 8: connection limits that hold against many source
// addresses. The attacker holds slow request heads (one byte at a time)
// from many addresses of one /24 and from many /24s, and a keyed tenant
// holds as many connections as it can; the other tenant's requests on
// fresh connections must still succeed.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
)

// The harness server's connection limits (--max-conns-per-tenant,
// --max-conns; --max-conns-per-prefix is 64).
const (
	harnessTenantConns = 128
	harnessMaxConns    = 1024
)

// bobAddr is bob's source address: a /24 of its own (127.0.1.0/24).
const bobAddr = "127.0.1.2"

// connFlood is a running connection attack on addr.
type connFlood struct {
	addr   string
	stop   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
	held   atomic.Int64 // connections open now, from the attacker's side
	dials  atomic.Int64
	failed atomic.Int64 // dials refused or connections cut
}

// slowHeads starts n attackers from each of srcs: each connects and sends
// a request head one byte per 200 ms; when the server cuts it, it dials
// again (after 300 ms, the attacker's pace).
func (f *connFlood) slowHeads(srcs []string, n int) {
	head := []byte("POST /v1/sandboxes HTTP/1.1\r\nHost: airlock\r\nContent-Type: application/json\r\nX-Pad: " + strings.Repeat("a", 4000) + "\r\n\r\n")
	for _, src := range srcs {
		for i := 0; i < n; i++ {
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 2 * time.Second}
				for !f.stopped(0) {
					c, err := d.Dial("tcp", f.addr)
					f.dials.Add(1)
					if err != nil {
						f.failed.Add(1)
						f.stopped(300 * time.Millisecond)
						continue
					}
					f.held.Add(1)
					for _, b := range head {
						if _, err := c.Write([]byte{b}); err != nil || f.stopped(200*time.Millisecond) {
							break
						}
					}
					f.held.Add(-1)
					f.failed.Add(1)
					c.Close()
					f.stopped(300 * time.Millisecond)
				}
			}()
		}
	}
}

// stopped waits d (the attacker's pace) and says whether the flood ends.
func (f *connFlood) stopped(d time.Duration) bool {
	if d == 0 {
		select {
		case <-f.stop:
			return true
		default:
			return false
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-f.stop:
		return true
	case <-t.C:
		return false
	}
}

func (f *connFlood) end() {
	f.once.Do(func() { close(f.stop) })
	f.wg.Wait()
}

// addrs lists a.b.c.d for d in from..to of network a.b.c.
func addrs(net string, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("%s.%d", net, i))
	}
	return out
}

// networks lists first address .1 of a.b.X for X in from..to.
func networks(prefix string, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("%s.%d.1", prefix, i))
	}
	return out
}

// keyedConns opens n connections of key, from 50 addresses per /24 of
// 127.2.X.Y, each making one authenticated request and staying open. It
// returns how many got 200, the first refusal's status and message, and
// the connections (the caller closes them).
func keyedConns(t *testing.T, addr, key string, n int) (ok int, refusal string, conns []net.Conn) {
	for i := 0; i < n; i++ {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("127.2.%d.%d", i/50, 1+i%50))}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("keyed connection %d: %v", i, err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "GET /v1/sandboxes HTTP/1.1\r\nHost: airlock\r\nAuthorization: Bearer %s\r\n\r\n", key)
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("keyed connection %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			ok++
		} else if refusal == "" {
			refusal = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
		}
	}
	return ok, refusal, conns
}

// freshRequests makes n requests of key from src, each on a new
// connection, and returns the errors.
func freshRequests(addr, key, src string, n int) []string {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	c, err := client.New("http://"+addr, client.WithAPIKey(key), client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		return []string{err.Error()}
	}
	var errs []string
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if _, err := c.List(ctx, client.ListOptions{}); err != nil {
			errs = append(errs, err.Error())
		}
		cancel()
	}
	return errs
}

// pidFds counts the open descriptors of pid.
func pidFds(pid int) int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents)
}

// waitFds waits until pid holds at least want more descriptors than base.
func waitFds(t *testing.T, pid, base, want int, what string) int {
	t.Helper()
	end := time.Now().Add(90 * time.Second)
	for {
		n := pidFds(pid)
		if n-base >= want {
			return n
		}
		if time.Now().After(end) {
			t.Fatalf("%s: the server holds %d descriptors (from %d), never %d more", what, n, base, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// unlimitedServe starts a second `airlock serve` with the per-network and
// per-tenant limits off and a 10-minute head deadline: the proof server.
func unlimitedServe(t *testing.T, h *serveHarness) (addr string, pid int, key string) {
	base := t.TempDir()
	must(t, os.Chmod(base, 0o711))
	must(t, os.Chmod(filepath.Dir(base), 0o711))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr = ln.Addr().String()
	ln.Close()
	data, sock := filepath.Join(base, "data"), filepath.Join(base, "s.sock")
	cmd := exec.Command(h.bin, "serve", "--data", data, "--socket", sock, "--listen", addr,
		"--backend", "native", "--disk-quota", "none", "--log-level", "error", "--max-conns", strconv.Itoa(harnessMaxConns),
		"--max-conns-per-prefix", "0", "--max-conns-per-tenant", "0", "--head-timeout", "10m")
	logf, err := os.Create(filepath.Join(base, "serve.log"))
	must(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	must(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		logf.Close()
	})
	local, err := client.New("unix://" + sock)
	must(t, err)
	defer local.Close()
	end := time.Now().Add(30 * time.Second)
	for {
		if _, err := local.Health(context.Background()); err == nil {
			break
		}
		if time.Now().After(end) {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("the proof server did not come up: %s", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, err := exec.Command(h.bin, "serve", "key", "create", "--tenant", "alice", "--data", data, "--json").CombinedOutput()
	if err != nil {
		t.Fatalf("proof server key: %v %s", err, out)
	}
	var k struct{ Key string }
	must(t, json.Unmarshal(out, &k))
	return addr, cmd.Process.Pid, k.Key
}

func attackConnFlood(h *serveHarness, t *testing.T, r *serveResult) {
	oneNet := addrs("127.0.0", 10, 78) // 69 addresses of 127.0.0.0/24, as in the finding
	manyNets := networks("127.3", 10, 99)

	// Proof: without the per-network limit and the head deadline, the
	// server holds every slow head of one /24, and alice holds 200
	// connections.
	paddr, ppid, pkey := unlimitedServe(t, h)
	pfd0 := pidFds(ppid)
	pf := &connFlood{addr: paddr, stop: make(chan struct{})}
	pf.slowHeads(oneNet, 12) // 828 connections
	pfd1 := waitFds(t, ppid, pfd0, 800, "proof server")
	time.Sleep(6 * time.Second) // longer than the default head deadline
	pfd2 := pidFds(ppid)
	pf.end()
	pok, _, pconns := keyedConns(t, paddr, pkey, 200)
	for _, c := range pconns {
		c.Close()
	}
	if pfd2-pfd0 < 800 || pok != 200 {
		t.Errorf("proof: the unlimited server held %d slow heads after 6 s, %d of 200 keyed connections", pfd2-pfd0, pok)
	}
	r.Proof = fmt.Sprintf("--max-conns-per-prefix 0 --max-conns-per-tenant 0 --head-timeout 10m: 828 slow heads from 69 addresses of one /24 held (server fds %d -> %d, %d after 6 s); alice held %d of 200 keyed connections", pfd0, pfd1, pfd2, pok)

	// The attack on the limited server.
	fd0 := h.fds()
	bobKey := h.keys["bob"][1]
	f := &connFlood{addr: h.addr, stop: make(chan struct{})}
	f.slowHeads(oneNet, 12)
	f.slowHeads(manyNets, 14) // 1260 from 90 networks: beyond --max-conns
	defer f.end()
	fd1 := waitFds(t, h.serverPid(), fd0, harnessMaxConns-100, "limited server")
	errsFlood := freshRequests(h.addr, bobKey, bobAddr, 20)
	ok, refusal, conns := keyedConns(t, h.addr, h.keys["alice"][1], 200)
	errsTenant := freshRequests(h.addr, bobKey, bobAddr, 20)
	fdPeak := h.fds()
	for _, c := range conns {
		c.Close()
	}
	f.end()
	if len(errsFlood)+len(errsTenant) > 0 {
		t.Errorf("bob's requests on fresh connections during the flood failed: %d+%d of 40: %v", len(errsFlood), len(errsTenant), append(errsFlood, errsTenant...)[:1])
	}
	// alice's own client may still hold kept-alive connections (at most
	// 48) from the attacks before: they count against her too.
	if ok > harnessTenantConns || ok < harnessTenantConns-48 || !strings.Contains(refusal, "429") || !strings.Contains(refusal, fmt.Sprintf("limit %d per tenant", harnessTenantConns)) {
		t.Errorf("alice's 200 keyed connections: %d got 200 (want %d less her client's kept-alive ones), refusal %q", ok, harnessTenantConns, refusal)
	}
	if fdPeak-fd0 > harnessMaxConns+64 {
		t.Errorf("server descriptors %d -> %d, more than --max-conns %d", fd0, fdPeak, harnessMaxConns)
	}
	ref, ev := h.connMetrics(t)
	r.Evidence = fmt.Sprintf("2,088 slow heads (69 addresses of one /24, 90 networks), %d dials: server fds %d -> %d (peak %d, --max-conns %d); %s refused at accept, %s anonymous evicted; bob's 40 requests on fresh connections all 200; alice held %d of 200 keyed connections, then %s",
		f.dials.Load(), fd0, fd1, fdPeak, harnessMaxConns, ref, ev, ok, firstLine(refusal))
	r.Verdict = "bounded"
}

// connMetrics reads the refused and evicted connection counters from the
// unix socket's /metrics.
func (h *serveHarness) connMetrics(t *testing.T) (refused, evicted string) {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", h.sock)
	}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("http://airlock/metrics")
	if err != nil {
		t.Errorf("metrics: %v", err)
		return "?", "?"
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	refused, evicted = "?", "?"
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "airlock_connections_refused_total "); ok {
			refused = v
		}
		if v, ok := strings.CutPrefix(l, "airlock_connections_evicted_total "); ok {
			evicted = v
		}
	}
	return refused, evicted
}
