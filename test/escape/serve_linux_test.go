package escape

// The server section of the escape suite: attacks on a real `airlock
// serve` (root, native backend, TCP with API keys) by a keyed tenant
// ("alice") while another tenant ("bob") keeps working. Each escape is
// first shown to work without the server's protection (the host reads the
// file, reaches the service, keeps the set-uid bit, the operator's socket
// takes the same request); each denial of service is bounded while bob's
// exec latency is measured, and nothing of bob's (sandboxes, events) may
// be lost. Figures go to the log and, with AIRLOCK_SCORECARD, to
// <scorecard>-serve.md.

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/internal/volume"
)

// serveHarness is one real server and its two tenants.
type serveHarness struct {
	t          *testing.T
	bin        string
	dir        string // the data filesystem's mount point (a small volume)
	data       string
	sock       string
	addr       string // 127.0.0.1:PORT
	cmd        *exec.Cmd
	alice, bob *client.Client
	local      *client.Client
	keys       map[string][2]string // tenant -> key ID, key
	bobSB      string
	backends   []string // offered: native, and gvisor where runsc is
}

// serveCeilings is the operator's policy for the tenants under attack.
const serveCeilings = `
default:
  network: {modes: [none, allowlist, open]}
  limits:
    max: {memory: 1Gi, pids: 256, open_files: 4096, disk: 256Mi, cpus: 2, timeout: 1h, output_bytes: 64Mi}
    default: {memory: 512Mi, pids: 128, open_files: 256, disk: 64Mi, cpus: 1, timeout: 1h}
    open_files_total: 65536
`

// startServe starts the server, with extra flags after the suite's own.
func startServe(t *testing.T, extra ...string) *serveHarness {
	t.Helper()
	h := &serveHarness{t: t, bin: agentBinary(t), keys: map[string][2]string{}, backends: []string{"native"}}
	base := t.TempDir()
	// Sandboxes run as host ids of their own: the path to the data
	// directory must be searchable by others (as /var/lib is).
	must(t, os.Chmod(base, 0o711))
	must(t, os.Chmod(filepath.Dir(base), 0o711))
	// The data directory lives on a filesystem of its own (1 GiB), so a
	// full data disk can be made for real without touching the host's.
	h.dir = filepath.Join(base, "datafs")
	v, err := volume.Create(context.Background(), filepath.Join(base, "datafs.img"), h.dir, 1<<30, 0, 0)
	if err != nil {
		t.Fatalf("data filesystem: %v", err)
	}
	t.Cleanup(func() { v.Remove() })
	h.data = filepath.Join(h.dir, "data")
	h.sock = filepath.Join(base, "airlock.sock")
	ceil := filepath.Join(base, "ceilings.yaml")
	must(t, os.WriteFile(ceil, []byte(serveCeilings), 0o644))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	h.addr = ln.Addr().String()
	ln.Close()
	args := []string{"serve", "--data", h.data, "--socket", h.sock, "--listen", h.addr, "--backend", "native"}
	if haveRunsc() || testutil.InCI() {
		// gVisor too (always in CI, which installs runsc): its sandboxes
		// must not run as a host user either.
		args = append(args, "--backend", "gvisor")
		h.backends = append(h.backends, "gvisor")
	}
	h.cmd = exec.Command(h.bin, append(append(args, "--default-backend", "native", "--ceilings", ceil, "--min-free", "128Mi", "--event-rate", "200",
		"--max-conns-per-prefix", "64", "--max-conns-per-tenant", strconv.Itoa(harnessTenantConns), "--max-conns", strconv.Itoa(harnessMaxConns), "--log-level", "warn",
		"--paused-retention", pausedRetention, "--upload-timeout", uploadTimeout), extra...)...)
	logf, err := os.Create(filepath.Join(base, "serve.log"))
	must(t, err)
	h.cmd.Stdout, h.cmd.Stderr = logf, logf
	must(t, h.cmd.Start())
	t.Cleanup(func() {
		h.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { h.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			h.cmd.Process.Kill()
			<-done
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("server log:\n%s", lastBytes(b, 8000))
		}
	})
	h.local, err = client.New("unix://" + h.sock)
	must(t, err)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := h.local.Health(context.Background()); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("airlock serve did not come up")
		}
		time.Sleep(50 * time.Millisecond)
	}
	h.alice = h.tenant("alice", "127.0.0.1")
	// bob comes from another loopback network: alice's connection floods
	// from 127.0.0.0/24 must not count against him.
	h.bob = h.tenant("bob", bobAddr)
	sb, err := h.bob.Create(context.Background(), api.CreateSandboxRequest{Labels: map[string]string{"who": "bob"}})
	must(t, err)
	h.bobSB = sb.ID
	return h
}

func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// key creates an API key of tenant with the CLI.
func (h *serveHarness) key(tenant string) (id, key string) {
	out, err := exec.Command(h.bin, "serve", "key", "create", "--tenant", tenant, "--data", h.data, "--json").Output()
	if err != nil {
		h.t.Fatalf("serve key create --tenant %s: %v", tenant, err)
	}
	var k struct{ ID, Key string }
	must(h.t, json.Unmarshal(out, &k))
	return k.ID, k.Key
}

// tenant returns a TCP client of a new key of tenant, dialing from src.
func (h *serveHarness) tenant(tenant, src string) *client.Client {
	id, key := h.key(tenant)
	h.keys[tenant] = [2]string{id, key}
	return h.client(key, src)
}

func (h *serveHarness) client(key, src string) *client.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	// Fewer connections than the server's per-client limit: the attacks
	// below are about what requests do, the slowloris about connections.
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 16, MaxConnsPerHost: 48}
	c, err := client.New("http://"+h.addr, client.WithAPIKey(key), client.WithHTTPClient(&http.Client{Transport: tr}))
	must(h.t, err)
	return c
}

// serverPid is the server's process.
func (h *serveHarness) serverPid() int { return h.cmd.Process.Pid }

// procStatus reads a field (kB) of the server's /proc/PID/status.
func (h *serveHarness) rssKB() int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", h.serverPid()))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	return -1
}

func (h *serveHarness) fds() int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", h.serverPid()))
	return len(ents)
}

// latency measures bob's exec round trips while an attack runs.
type latency struct {
	mu     sync.Mutex
	d      []time.Duration
	errs   []string
	stop   chan struct{}
	done   chan struct{}
	client *client.Client
	sb     string
}

func (h *serveHarness) probe() *latency {
	l := &latency{stop: make(chan struct{}), done: make(chan struct{}), client: h.bob, sb: h.bobSB}
	go func() {
		defer close(l.done)
		for {
			select {
			case <-l.stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			t0 := time.Now()
			res, err := l.client.Run(ctx, l.sb, "true")
			d := time.Since(t0)
			cancel()
			l.mu.Lock()
			if err != nil || res.Code != 0 {
				l.errs = append(l.errs, fmt.Sprint(err))
			} else {
				l.d = append(l.d, d)
			}
			l.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return l
}

// end stops the probe and returns "n=.. p50=.. p99=.. max=.." and the errors.
func (l *latency) end() (string, time.Duration, []string) {
	close(l.stop)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return "no successful exec", 0, l.errs
	}
	sort.Slice(l.d, func(i, j int) bool { return l.d[i] < l.d[j] })
	q := func(f float64) time.Duration { return l.d[min(len(l.d)-1, int(f*float64(len(l.d))))] }
	p99 := q(0.99)
	return fmt.Sprintf("n=%d p50=%s p99=%s max=%s", len(l.d), q(0.5).Round(100*time.Microsecond), p99.Round(100*time.Microsecond), l.d[len(l.d)-1].Round(100*time.Microsecond)), p99, l.errs
}

// serveResult is one row of the server scorecard.
type serveResult struct {
	Name, Item, Goal string
	Proof            string // what shows the attack works without the protection
	Verdict          string // blocked / bounded / ESCAPED
	Evidence         string
	Neighbour        string // bob's exec latency during the attack
	p99              time.Duration
}

type serveAttack struct {
	name, item, goal string
	dos              bool // measure bob's latency while it runs
	run              func(h *serveHarness, t *testing.T, r *serveResult)
}

// TestServeAttacks runs every server attack and fails on any ESCAPED,
// any proof that did not hold and any loss of the neighbour's work.
func TestServeAttacks(t *testing.T) {
	testutil.RequireLinux(t)
	testutil.RequireRoot(t)
	if why := volume.Available(); why != "" {
		testutil.Skip(t, "server attacks: "+why)
	}
	h := startServe(t)
	var results []*serveResult
	for _, a := range serveAttacks() {
		r := &serveResult{Name: a.name, Item: a.item, Goal: a.goal}
		t.Run(a.name, func(t *testing.T) {
			var lat *latency
			if a.dos {
				lat = h.probe()
			}
			a.run(h, t, r)
			if lat != nil {
				var errs []string
				r.Neighbour, r.p99, errs = lat.end()
				if len(errs) > 0 {
					t.Errorf("the neighbour's execs failed during %s: %v", a.name, errs[:min(3, len(errs))])
				}
			}
			if r.Verdict == "" {
				r.Verdict = "blocked"
			}
			if t.Failed() {
				r.Verdict = "ESCAPED"
			}
			t.Logf("%s: %s (%s); proof: %s; neighbour: %s", r.Verdict, r.Evidence, r.Goal, r.Proof, r.Neighbour)
		})
		results = append(results, r)
	}
	h.checkNeighbour(t)
	writeServeScorecard(t, results)
}

// checkNeighbour: bob's sandbox is alive and his events have no gap.
func (h *serveHarness) checkNeighbour(t *testing.T) {
	ctx := context.Background()
	if _, err := h.bob.Run(ctx, h.bobSB, "true"); err != nil {
		t.Errorf("bob's sandbox after the attacks: %v", err)
	}
	evs, err := h.bob.Events(ctx, h.bobSB, 0)
	if err != nil {
		t.Fatalf("bob's events: %v", err)
	}
	if len(evs) == 0 || evs[0].Type != "start" {
		t.Errorf("bob's events do not start with his sandbox's start: %d events", len(evs))
	}
}

func writeServeScorecard(t *testing.T, rs []*serveResult) {
	out := os.Getenv("AIRLOCK_SCORECARD")
	if out == "" {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Escape scorecard: airlock serve\n\nGenerated by `make escape` (TestServeAttacks) on %s. A real `airlock serve` (root, native backend, TCP with API keys, the ceilings of test/escape/serve_linux_test.go) is attacked by keyed tenant alice while tenant bob, from another client address, runs `true` every 20 ms; bob's exec round trip is measured during each denial of service. Each attack is first shown to work without the protection (proof).\n\n", time.Now().UTC().Format(time.RFC3339))
	b.WriteString("| attack | issue 11 item | verdict | evidence | proof | bob's exec latency |\n|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.Name, r.Item, r.Verdict, mdCell(r.Evidence), mdCell(r.Proof), mdCell(r.Neighbour))
	}
	must(t, os.WriteFile(out+"-serve.md", []byte(b.String()), 0o644))
}

func mdCell(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", "\\|"), "\n", " ") }

// wantRefused checks err is an API refusal with status and (if set) a
// message naming what.
func wantRefused(t *testing.T, what string, err error, status int, names string) string {
	t.Helper()
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != status || (names != "" && !strings.Contains(ce.Message, names)) {
		t.Errorf("%s: got %v, want %d naming %q", what, err, status, names)
		return ""
	}
	return fmt.Sprintf("%d %s", ce.Status, ce.Code)
}

func serveAttacks() []serveAttack {
	return append([]serveAttack{
		{name: "baseline", item: "-", dos: true, goal: "no attack: bob's exec latency on this machine now, to read the others by", run: func(h *serveHarness, t *testing.T, r *serveResult) {
			time.Sleep(3 * time.Second)
			r.Verdict, r.Evidence, r.Proof = "-", "nothing runs but bob's execs", "-"
		}},
		{name: "ssrf-loopback-cidr", item: "escape 1", goal: "reach a service on the host's loopback with an allow-list CIDR", run: attackSSRFCIDR},
		{name: "ssrf-split-halves", item: "escape 1", goal: "lift the SSRF guard with 0.0.0.0/1 + 128.0.0.0/1 (at create and PUT network)", run: attackSSRFHalves},
		{name: "host-root-file", item: "escape 2", goal: "read a root-only host file outside the deny list (exec cat, GET files, archive)", run: attackRootFile},
		{name: "setuid-in-data-dir", item: "escape 3", goal: "leave a set-uid root program in the server's data directory through exec", run: attackSetuid},
		{name: "remove-limits", item: "DoS: limits", goal: "create a sandbox with every limit removed", run: attackRemoveLimits},
		{name: "disk-fill", item: "DoS: disk", dos: true, goal: "fill the server's disk from a workspace", run: attackDiskFill},
		{name: "sparse-tar", item: "DoS: archive", dos: true, goal: "expand a 10 KB sparse tar into 2 GiB on the host", run: attackSparseTar},
		{name: "background-execs", item: "DoS: processes", dos: true, goal: "start 400 background execs at once", run: attackBackgroundExecs},
		{name: "slowloris", item: "DoS: connections", dos: true, goal: "exhaust the server's descriptors with slow unauthenticated connections", run: attackSlowloris},
		{name: "violation-flood", item: "DoS: events", dos: true, goal: "flood the store with denied-syscall events", run: attackViolationFlood},
		{name: "open-files", item: "DoS: descriptors", dos: true, goal: "hold a large share of the host's open files", run: attackOpenFiles},
		{name: "data-disk-full", item: "DoS: store", dos: false, goal: "lose the neighbour's audit events by filling the data disk", run: attackDataDiskFull},
		{name: "key-for-local", item: "small", goal: "act on the unix socket's sandboxes with a key of tenant local", run: attackLocalKey},
		{name: "spool-left", item: "small", goal: "leave upload spool files behind", run: attackSpool},
		{name: "truncated-download", item: "small", goal: "get a 200 with a silently cut tar for a tree over the limit", run: attackTruncatedDownload},
		{name: "revoked-stream", item: "small", goal: "keep an event stream after the key was revoked", run: attackRevokedStream},
		{name: "probe-details", item: "small", goal: "read host probe details and /metrics with a key", run: attackProbeDetails},
	}, costAttacks()...)
}

// baitService is a TCP service on addr that counts connections.
func baitService(t *testing.T, addr string) (string, *atomic.Int32) {
	ln, err := net.Listen("tcp", addr)
	must(t, err)
	var hits atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			hits.Add(1)
			c.Write([]byte("HTTP/1.0 200 OK\r\n\r\nbait\n"))
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String(), &hits
}

func attackSSRFCIDR(h *serveHarness, t *testing.T, r *serveResult) {
	ctx := context.Background()
	addr, hits := baitService(t, "127.0.0.1:0")
	if c, err := net.Dial("tcp", addr); err == nil {
		// Read the answer: the service counts a connection before it
		// answers, so the proof's hit is counted before the reset below.
		b, _ := io.ReadAll(c)
		c.Close()
		if strings.Contains(string(b), "bait") {
			r.Proof = "the bait service on " + addr + " answers on the host"
		}
	}
	hits.Store(0)
	pol := `{"network":{"mode":"allowlist","allow":["127.0.0.1/32"]}}`
	_, err := h.alice.Create(ctx, api.CreateSandboxRequest{Policy: json.RawMessage(pol)})
	r.Evidence = wantRefused(t, "create with allow 127.0.0.1/32", err, 403, "ceiling network.allow")
	// The operator (socket) may: the request itself is right.
	sb, err := h.local.Create(ctx, api.CreateSandboxRequest{Policy: json.RawMessage(`{"network":{"mode":"allowlist","allow":["127.0.0.1/32"]},"limits":{"disk":"16Mi"}}`)})
	if err != nil {
		t.Fatalf("the operator's identical request: %v", err)
	}
	h.local.Delete(ctx, sb.ID)
	r.Proof += "; the operator's identical request is accepted"
	// A tenant sandbox with a public allow-list tries the host through
	// the proxy anyway: the guard holds.
	sb, err = h.alice.Create(ctx, api.CreateSandboxRequest{Policy: json.RawMessage(`{"network":{"mode":"allowlist","allow":["example.com:443"]}}`)})
	must(t, err)
	defer h.alice.Delete(ctx, sb.ID)
	res, _ := h.alice.Run(ctx, sb.ID, "sh", "-c", "curl -s -m 3 --proxy \"$HTTP_PROXY\" http://"+addr+"/ || python3 -c 'import urllib.request,os; print(urllib.request.urlopen(\"http://"+addr+"/\",timeout=3).read())'")
	if hits.Load() != 0 || (res != nil && strings.Contains(string(res.Stdout), "bait")) {
		t.Errorf("the bait service on the host's loopback was reached: %d hits", hits.Load())
	}
	r.Evidence += "; through the proxy: 0 hits"
}

func attackSSRFHalves(h *serveHarness, t *testing.T, r *serveResult) {
	ctx := context.Background()
	halves := []string{"0.0.0.0/1", "128.0.0.0/1"}
	pol, _ := json.Marshal(map[string]any{"network": map[string]any{"mode": "open", "allow": halves}})
	_, err := h.alice.Create(ctx, api.CreateSandboxRequest{Policy: pol})
	r.Evidence = "create: " + wantRefused(t, "create with two /1 halves", err, 403, "ceiling network.allow")
	sb, err := h.alice.Create(ctx, api.CreateSandboxRequest{Policy: json.RawMessage(`{"network":{"mode":"allowlist"}}`)})
	must(t, err)
	defer h.alice.Delete(ctx, sb.ID)
	err = h.alice.SetNetwork(ctx, sb.ID, api.NetworkRequest{Mode: "open", Allow: halves})
	r.Evidence += "; PUT network: " + wantRefused(t, "PUT network with two /1 halves", err, 403, "ceiling network.allow")
	for _, a := range []string{"169.254.169.254/32", "::/0", "::ffff:0:0/96", "100.64.0.0/10"} {
		err := h.alice.SetNetwork(ctx, sb.ID, api.NetworkRequest{Mode: "allowlist", Allow: []string{a}})
		wantRefused(t, "PUT network "+a, err, 403, "ceiling network.allow")
	}
	r.Proof = "the operator's socket accepts the same PUT"
	if err := h.local.SetNetwork(ctx, sb.ID, api.NetworkRequest{Mode: "open", Allow: halves}); err == nil {
		t.Errorf("the operator changed a tenant's sandbox: sandboxes are per tenant")
	}
	osb, err := h.local.Create(ctx, api.CreateSandboxRequest{Policy: json.RawMessage(`{"network":{"mode":"allowlist"},"limits":{"disk":"16Mi"}}`)})
	must(t, err)
	defer h.local.Delete(ctx, osb.ID)
	if err := h.local.SetNetwork(ctx, osb.ID, api.NetworkRequest{Mode: "open", Allow: halves}); err != nil {
		t.Errorf("the operator's own PUT: %v", err)
	}
}

func attackRootFile(h *serveHarness, t *testing.T, r *serveResult) {
	ctx := context.Background()
	token := fmt.Sprintf("root-only-%d", time.Now().UnixNano())
	path := fmt.Sprintf("/etc/airlock-bait-root-%d.cnf", os.Getpid())
	must(t, os.WriteFile(path, []byte("password = "+token+"\n"), 0o600))
	defer os.Remove(path)
	if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), token) {
		r.Proof = "root on the host reads " + path
	}
	var seen []string
	for _, be := range h.backends {
		sb, err := h.alice.Create(ctx, api.CreateSandboxRequest{Backend: be})
		must(t, err)
		res, err := h.alice.Run(ctx, sb.ID, "sh", "-c", "cat "+path)
		must(t, err)
		if strings.Contains(string(res.Stdout), token) {
			t.Errorf("%s: exec cat read the root-only file", be)
		}
		rc, err := h.alice.ReadFile(ctx, sb.ID, path)
		if err == nil {
			b, _ := io.ReadAll(rc)
			rc.Close()
			if strings.Contains(string(b), token) {
				t.Errorf("%s: GET files read the root-only file", be)
			}
		}
		seen = append(seen, fmt.Sprintf("%s: exec %s, GET files %s", be, firstLine(string(res.Stderr)), shortErr(err)))
		h.alice.Delete(ctx, sb.ID)
	}
	sb, err := h.alice.Create(ctx, api.CreateSandboxRequest{})
	must(t, err)
	defer h.alice.Delete(ctx, sb.ID)
	res, err := h.alice.Run(ctx, sb.ID, "sh", "-c", "id -u; cat "+path+"; cat /proc/self/uid_map")
	if err == nil {
		if strings.Contains(string(res.Stdout), token) {
			t.Errorf("exec cat read the root-only file: %q", string(res.Stdout))
		}
		seen = append(seen, "exec: "+firstLine(string(res.Stderr)))
		if m := strings.Fields(lastLine(string(res.Stdout))); len(m) == 3 && m[1] == "0" {
			t.Errorf("sandbox uid 0 maps to host uid 0: %q", string(res.Stdout))
		} else if len(m) == 3 {
			seen = append(seen, "uid 0 inside is host uid "+m[1])
		}
	}
	rc, err := h.alice.ReadFile(ctx, sb.ID, path)
	if err == nil {
		b, _ := io.ReadAll(rc)
		rc.Close()
		if strings.Contains(string(b), token) {
			t.Errorf("GET files read the root-only file")
		}
	}
	seen = append(seen, fmt.Sprintf("GET files: %v", shortErr(err)))
	if rc, err := h.alice.Download(ctx, sb.ID, "/etc"); err == nil {
		b, _ := io.ReadAll(rc)
		rc.Close()
		if bytes.Contains(b, []byte(token)) {
			t.Errorf("the /etc archive holds the root-only file")
		}
		seen = append(seen, "archive of /etc: no token")
	} else {
		seen = append(seen, fmt.Sprintf("archive of /etc: %v", shortErr(err)))
	}
	r.Evidence = strings.Join(seen, "; ")
}

func attackSetuid(h *serveHarness, t *testing.T, r *serveResult) {
	ctx := context.Background()
	tmp := t.TempDir()
	p := filepath.Join(tmp, "sh")
	must(t, copyFile("/bin/sh", p, 0o755))
	if err := syscall.Chmod(p, 0o6755); err == nil {
		if fi, _ := os.Stat(p); fi.Mode()&os.ModeSetuid != 0 {
			r.Proof = "chmod 6755 works on the host"
		}
	}
	sb, err := h.alice.Create(ctx, api.CreateSandboxRequest{})
	must(t, err)
	defer h.alice.Delete(ctx, sb.ID)
	script := `cp /bin/sh s1; chmod 6755 s1; chmod u+s s1; mkdir -p a/b/c; cp /bin/sh a/b/c/s2; chmod 4755 a/b/c/s2;
python3 -c 'import os; os.close(os.open("s3", os.O_CREAT|os.O_WRONLY, 0o6755))';
python3 -c 'import os; os.mknod("s4", 0o104755)'; install -m 6755 /bin/sh s5; ls -l`
	res, err := h.alice.Run(ctx, sb.ID, "sh", "-c", script)
	must(t, err)
	var found []string
	filepath.Walk(h.data, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			found = append(found, p)
		}
		return nil
	})
	if len(found) > 0 {
		t.Errorf("set-id files in the data directory: %v\n%s", found, string(res.Stdout))
	}
	r.Evidence = fmt.Sprintf("no set-id file under the data dir after 5 ways at depth 1 and 4 (%s)", firstLine(string(res.Stderr)))
}

func attackRemoveLimits(h *serveHarness, t *testing.T, r *serveResult) {
	ctx := context.Background()
	var ev []string
	for _, l := range []string{"pids", "memory", "cpus", "disk", "open_files"} {
		pol := fmt.Sprintf(`{"limits":{%q:0}}`, l)
		_, err := h.alice.Create(ctx, api.CreateSandboxRequest{Policy: json.RawMessage(pol)})
		if s := wantRefused(t, "create with "+l+": 0", err, 403, "ceiling limits.unlimited"); s != "" {
			ev = append(ev, l+"=0: "+s)
		}
	}
	_, err := h.alice.Create(ctx, api.CreateSandboxRequest{Policy: json.RawMessage(`{"limits":{"memory":"9223372036854775807"}}`)})
	wantRefused(t, "create with memory 2^63", err, 403, "ceiling limits.max.memory")
	_, err = h.alice.Create(ctx, api.CreateSandboxRequest{Policy: json.RawMessage(`{"limits":{"disk":"12Gi"}}`)})
	wantRefused(t, "create with a 12 GiB disk", err, 403, "ceiling limits.max.disk")
	sb, err := h.local.Create(ctx, api.CreateSandboxRequest{Policy: json.RawMessage(`{"limits":{"pids":0,"open_files":0,"disk":"16Mi"}}`)})
	if err != nil {
		t.Fatalf("the operator's request without limits: %v", err)
	}
	h.local.Delete(ctx, sb.ID)
	r.Proof = "the operator's socket accepts limits removed"
	r.Evidence = strings.Join(ev, "; ") + "; memory 2^63 and disk 12Gi: 403 limits.max"
}

func attackDiskFill(h *serveHarness, t *testing.T, r *serveResult) {
	ctx := context.Background()
	before := freeOf(h.dir)
	sb, err := h.alice.Create(ctx, api.CreateSandboxRequest{})
	must(t, err)
	defer h.alice.Delete(ctx, sb.ID)
	res, err := h.alice.Run(ctx, sb.ID, "sh", "-c", "dd if=/dev/zero of=fill bs=1M count=2048 2>&1 | tail -1; df -k . | tail -1")
	must(t, err)
	after := freeOf(h.dir)
	// Keep at it (a full workspace, writes refused) while bob works.
	h.alice.Run(ctx, sb.ID, "sh", "-c", "t=$(($(date +%s)+3)); while [ $(date +%s) -lt $t ]; do dd if=/dev/zero of=more bs=1M count=64 2>/dev/null; rm -f more; done")
	used := before - after
	if used > 80<<20 {
		t.Errorf("the workspace took %d MiB of the data disk (quota 64 MiB): %s", used>>20, string(res.Stdout))
	}
	r.Proof = "dd of 2 GiB (the data filesystem has 1 GiB)"
	r.Evidence = fmt.Sprintf("stopped at the 64 MiB quota (ENOSPC); data disk use +%d MiB: %s", used>>20, firstLine(string(res.Stdout)))
	r.Verdict = "bounded"
}

func freeOf(dir string) int64 {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil {
		return 0
	}
	return int64(st.Bavail) * st.Bsize
}

// sparseTar writes, with GNU tar, an archive of one sparse file of size.
func sparseTar(t *testing.T, size string) []byte {
	dir := t.TempDir()
	must(t, exec.Command("truncate", "-s", size, filepath.Join(dir, "big")).Run())
	out := filepath.Join(t.TempDir(), "s.tar")
	if b, err := exec.Command("tar", "--sparse", "--format=pax", "-C", dir, "-cf", out, "big").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, b)
	}
	b, err := os.ReadFile(out)
	must(t, err)
	return b
}

func attackSparseTar(h *serveHarness, t *testing.T, r *serveResult) {
	ctx := context.Background()
	archive := sparseTar(t, "2G")
	tr := tar.NewReader(bytes.NewReader(archive))
	if hd, err := tr.Next(); err == nil {
		r.Proof = fmt.Sprintf("a %d-byte archive whose entry extracts to %d bytes", len(archive), hd.Size)
	}
	sb, err := h.alice.Create(ctx, api.CreateSandboxRequest{})
	must(t, err)
	defer h.alice.Delete(ctx, sb.ID)
	before := freeOf(h.dir)
	err = h.alice.Upload(ctx, sb.ID, "/tmp/x", bytes.NewReader(archive))
	r.Evidence = wantRefused(t, "sparse 2 GiB upload", err, 413, "sparse")
	// Again and again for 3 s, while bob works.
	for t0 := time.Now(); time.Since(t0) < 3*time.Second; {
		h.alice.Upload(ctx, sb.ID, "/tmp/x", bytes.NewReader(archive))
	}
	if used := before - freeOf(h.dir); used > 16<<20 {
		t.Errorf("the refused upload took %d MiB of the data disk", used>>20)
	}
	// Within the quota's reach but over it: extraction stops at the
	// quota and what it made is removed.
	over := workdirOf(h, sb.ID) + "/over"
	err = h.alice.Upload(ctx, sb.ID, over, bytes.NewReader(sparseTar(t, "100M")))
	if err == nil {
		t.Errorf("a 100 MiB extraction into a 64 MiB workspace succeeded")
	}
	res, _ := h.alice.Run(ctx, sb.ID, "sh", "-c", "ls -laR; du -sk .")
	if res != nil && strings.Contains(string(res.Stdout), "big") {
		t.Errorf("a failed extraction left a partial file: %s", string(res.Stdout))
	}
	r.Evidence += fmt.Sprintf("; 100 MiB into the 64 MiB workspace: refused (%s), nothing left", shortErr(err))
	r.Verdict = "bounded"
}

func attackBackgroundExecs(h *serveHarness, t *testing.T, r *serveResult) {
	ctx := context.Background()
	// Room for 64 processes and the agent's three pipes for each, within
	// open_files_total: the cap under test is the server's.
	sb, err := h.alice.Create(ctx, api.CreateSandboxRequest{Policy: json.RawMessage(`{"limits":{"pids":160,"open_files":400}}`)})
	must(t, err)
	defer h.alice.Delete(ctx, sb.ID)
	rss0 := h.rssKB()
	var ok, limited, other atomic.Int32
	// (The sandbox has room for the processes: the cap under test is the
	// server's, not pids.)
	var wg sync.WaitGroup
	for i := 0; i < 400; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := h.alice.Start(ctx, sb.ID, client.ExecOptions{Args: []string{"sh", "-c", "head -c 2000000 /dev/zero; exec sleep 60"}})
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, errdefs.ErrLimit):
				limited.Add(1)
			default:
				if other.Add(1) == 1 {
					t.Logf("a background exec failed otherwise: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	time.Sleep(3 * time.Second) // bob works beside them
	rss1 := h.rssKB()
	// Started ones that ended (a fork refused by pids) free their slot:
	// what the cap bounds is how many run at once.
	procs, err := h.alice.Processes(ctx, sb.ID)
	must(t, err)
	running := 0
	for _, p := range procs {
		if p.Running {
			running++
		}
	}
	if running > 64 {
		t.Errorf("%d background processes running at once, the cap is 64", running)
	}
	r.Proof = "400 concurrent POST exec {background:true}"
	if other.Load() > 0 {
		t.Errorf("%d background execs failed otherwise than by the limit", other.Load())
	}
	r.Evidence = fmt.Sprintf("%d started (%d running at once), %d refused 429; server RSS %d -> %d MiB", ok.Load(), running, limited.Load(), rss0>>10, rss1>>10)
	r.Verdict = "bounded"
}

func attackSlowloris(h *serveHarness, t *testing.T, r *serveResult) {
	fds0 := h.fds()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 3000; i++ {
		c, err := net.DialTimeout("tcp", h.addr, time.Second)
		if err != nil {
			continue
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "PUT /v1/sandboxes/x/archive HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\nA")
	}
	time.Sleep(3 * time.Second) // held while bob works
	fds1 := h.fds()
	if fds1-fds0 > 200 {
		t.Errorf("server descriptors %d -> %d under 3000 slow connections (limit 64 per client)", fds0, fds1)
	}
	// The operator's socket still answers.
	if _, err := h.local.Health(context.Background()); err != nil {
		t.Errorf("the unix socket during the flood: %v", err)
	}
	r.Proof = fmt.Sprintf("%d connections opened from one address, headers and one body byte each", len(conns))
	r.Evidence = fmt.Sprintf("server descriptors %d -> %d; the rest closed at accept", fds0, fds1)
	r.Verdict = "bounded"
}

func attackViolationFlood(h *serveHarness, t *testing.T, r *serveResult) {
	ctx := context.Background()
	sb, err := h.alice.Create(ctx, api.CreateSandboxRequest{})
	must(t, err)
	defer h.alice.Delete(ctx, sb.ID)
	db := filepath.Join(h.data, "airlock.db-wal")
	size := func() int64 {
		var n int64
		for _, f := range []string{filepath.Join(h.data, "airlock.db"), db} {
			if fi, err := os.Stat(f); err == nil {
				n += fi.Size()
			}
		}
		return n
	}
	s0 := size()
	// 165 is mount(2) on amd64: denied and reported by the supervisor.
	res, err := h.alice.Run(ctx, sb.ID, "python3", "-c", `import ctypes,time
libc=ctypes.CDLL(None); n=0; t=time.time()
while time.time()-t < 8:
    libc.syscall(165,0,0,0,0,0); n+=1
print(n)`)
	must(t, err)
	n, _ := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	// Every denied call is counted once the last aggregate is stored (a
	// second after the calls end): poll for it, within a deadline.
	var evs []api.Event
	counted := 0
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		evs, err = h.alice.Events(ctx, sb.ID, 0)
		must(t, err)
		counted = 0
		for _, e := range evs {
			if e.Type != "violation" {
				continue
			}
			if a, ok := e.Fields["aggregated"].(float64); ok {
				counted += int(a)
			} else {
				counted++
			}
		}
		if counted >= n || time.Now().After(deadline) {
			break
		}
	}
	grew := size() - s0
	if len(evs) > 5000 || grew > 32<<20 {
		t.Errorf("%d denied calls stored %d events, store +%d MiB", n, len(evs), grew>>20)
	}
	r.Proof = fmt.Sprintf("%d denied mount(2) calls in 8 s", n)
	r.Evidence = fmt.Sprintf("%d events stored, counting %d violations; store +%d KiB", len(evs), counted, grew>>10)
	r.Verdict = "bounded"
}

func fileNr() int {
	b, _ := os.ReadFile("/proc/sys/fs/file-nr")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

func attackOpenFiles(h *serveHarness, t *testing.T, r *serveResult) {
	ctx := context.Background()
	// Ask for the most the ceiling allows per process: pids × open_files
	// must stay within open_files_total.
	_, err := h.alice.Create(ctx, api.CreateSandboxRequest{Policy: json.RawMessage(`{"limits":{"pids":256,"open_files":4096}}`)})
	wantRefused(t, "pids 256 × open_files 4096", err, 403, "open_files_total")
	sb, err := h.alice.Create(ctx, api.CreateSandboxRequest{Policy: json.RawMessage(`{"limits":{"pids":128}}`)})
	must(t, err)
	defer h.alice.Delete(ctx, sb.ID)
	n0 := fileNr()
	res, err := h.alice.Run(ctx, sb.ID, "python3", "-c", `import os,resource,time
soft,hard=resource.getrlimit(resource.RLIMIT_NOFILE)
try: resource.setrlimit(resource.RLIMIT_NOFILE,(hard,hard))
except Exception: pass
kids=[]
for i in range(200):
    try: pid=os.fork()
    except OSError: break
    if pid==0:
        fs=[]
        try:
            while True: fs.append(os.open("/dev/null",os.O_RDONLY))
        except OSError: pass
        time.sleep(6); os._exit(0)
    kids.append(pid)
time.sleep(3)
print(len(kids), open("/proc/sys/fs/file-nr").read().split()[0])
for k in kids: os.waitpid(k,0)`)
	must(t, err)
	n1 := 0
	if f := strings.Fields(string(res.Stdout)); len(f) == 2 {
		n1, _ = strconv.Atoi(f[1])
	}
	held := n1 - n0
	if held > 70000 {
		t.Errorf("the sandbox held %d open files (ceiling 65536): %s", held, string(res.Stdout))
	}
	r.Proof = "processes forking and opening /dev/null until refused"
	r.Evidence = fmt.Sprintf("host open files +%d (pids × open_files ≤ 65536): %s", held, strings.TrimSpace(string(res.Stdout)))
	r.Verdict = "bounded"
}

func attackDataDiskFull(h *serveHarness, t *testing.T, r *serveResult) {
	ctx := context.Background()
	sb, err := h.bob.Create(ctx, api.CreateSandboxRequest{Labels: map[string]string{"who": "bob-2"}})
	must(t, err)
	if _, err := h.bob.Run(ctx, sb.ID, "true"); err != nil {
		t.Fatal(err)
	}
	// Something else fills the data disk: first below the reserve...
	filler := filepath.Join(h.dir, "filler")
	f, err := os.Create(filler)
	must(t, err)
	defer os.Remove(filler)
	fill := func(keep int64) {
		buf := make([]byte, 1<<20)
		for freeOf(h.dir) > keep {
			if _, err := f.Write(buf); err != nil {
				break
			}
		}
		f.Sync()
	}
	fill(64 << 20)
	_, err = h.bob.Run(ctx, sb.ID, "true")
	r.Evidence = "disk low: exec " + wantRefused(t, "exec with the data disk low", err, 507, "")
	_, err = h.alice.Create(ctx, api.CreateSandboxRequest{})
	wantRefused(t, "create with the data disk low", err, 507, "")
	if hh, err := h.local.Health(ctx); err != nil || hh.Status != "degraded" {
		t.Errorf("healthz with the data disk low: %v %+v", err, hh)
	}
	// ...then full: bob's destroy (not new work) is still recorded once
	// there is room again, with no gap.
	fill(0)
	r.Proof = fmt.Sprintf("the data disk filled to %d bytes free", freeOf(h.dir))
	done := make(chan error, 1)
	go func() { done <- h.bob.Delete(ctx, sb.ID) }()
	time.Sleep(2 * time.Second)
	f.Close()
	os.Remove(filler)
	if err := <-done; err != nil {
		t.Errorf("bob's delete with the disk full: %v", err)
	}
	var evs []api.Event
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		evs, err = h.bob.Events(ctx, sb.ID, 0)
		if err == nil && len(evs) > 0 && evs[len(evs)-1].Type == "destroy" {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	if len(evs) == 0 || evs[len(evs)-1].Type != "destroy" {
		t.Errorf("bob's events after the full disk: %v", types)
	}
	r.Evidence += fmt.Sprintf("; disk full: bob's events %v all stored once there was room", types)
	if hh, err := h.local.Health(ctx); err != nil || hh.Status != "ok" {
		t.Errorf("healthz after the disk was freed: %v %+v", err, hh)
	}
}

func attackLocalKey(h *serveHarness, t *testing.T, r *serveResult) {
	out, err := exec.Command(h.bin, "serve", "key", "create", "--tenant", "local", "--data", h.data).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 125 {
		t.Errorf("serve key create --tenant local: %v %s", err, out)
	}
	r.Evidence = "exit 125: " + firstLine(string(out))
	r.Proof = "keys for other tenants are created the same way"
}

func attackSpool(h *serveHarness, t *testing.T, r *serveResult) {
	ctx := context.Background()
	sb, err := h.alice.Create(ctx, api.CreateSandboxRequest{})
	must(t, err)
	defer h.alice.Delete(ctx, sb.ID)
	// An upload that fails in the middle (a body that breaks off).
	pr, pw := io.Pipe()
	go func() {
		pw.Write(bytes.Repeat([]byte{0}, 8<<20))
		pw.CloseWithError(errors.New("client went away"))
	}()
	h.alice.Upload(ctx, sb.ID, "/tmp/u", pr)
	left, _ := filepath.Glob(filepath.Join(h.data, "upload-*"))
	if len(left) > 0 {
		t.Errorf("spool files left: %v", left)
	}
	r.Proof = "an 8 MiB upload broken off mid-body"
	r.Evidence = "no upload-* file in the data dir (spools are unlinked when made, so neither a crash nor a shutdown can leave one)"
}

func attackTruncatedDownload(h *serveHarness, t *testing.T, r *serveResult) {
	ctx := context.Background()
	sb, err := h.alice.Create(ctx, api.CreateSandboxRequest{})
	must(t, err)
	defer h.alice.Delete(ctx, sb.ID)
	if _, err := h.alice.Run(ctx, sb.ID, "sh", "-c", "mkdir -p deep/$(yes d | head -70 | tr '\\n' /)"); err != nil {
		t.Fatal(err)
	}
	rc, err := h.alice.Download(ctx, sb.ID, "/tmp/../"+strings.TrimPrefix(workdirOf(h, sb.ID), "/")+"/deep")
	if err == nil {
		rc.Close()
		t.Errorf("a tree over the depth limit was answered 200")
	}
	r.Proof = "a tree 70 directories deep (the limit is 64)"
	r.Evidence = "answered " + shortErr(err)
}

func workdirOf(h *serveHarness, id string) string {
	sb, err := h.alice.Get(context.Background(), id)
	if err != nil {
		return "/"
	}
	return sb.Workdir
}

func attackRevokedStream(h *serveHarness, t *testing.T, r *serveResult) {
	ctx := context.Background()
	id, key := h.key("alice")
	c := h.client(key, "127.0.0.1")
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	must(t, err)
	defer h.alice.Delete(ctx, sb.ID)
	done := make(chan error, 1)
	go func() { done <- c.FollowEvents(ctx, sb.ID, 0, func(api.Event) error { return nil }) }()
	time.Sleep(300 * time.Millisecond)
	// Flags after the ID, as operators type them.
	if out, err := exec.Command(h.bin, "serve", "key", "revoke", id, "--data", h.data).CombinedOutput(); err != nil {
		t.Fatalf("serve key revoke ID --data DIR: %v %s", err, out)
	}
	t0 := time.Now()
	select {
	case <-done:
		r.Evidence = fmt.Sprintf("the stream ended %s after `serve key revoke %s --data DIR`", time.Since(t0).Round(10*time.Millisecond), id)
	case <-time.After(10 * time.Second):
		t.Errorf("the revoked key's stream kept running")
	}
	r.Proof = "the stream runs until the revocation"
}

func attackProbeDetails(h *serveHarness, t *testing.T, r *serveResult) {
	ctx := context.Background()
	hh, err := h.alice.Health(ctx)
	if err != nil || len(hh.Backends) != 0 {
		t.Errorf("health with a key shows probes: %v %+v", err, hh)
	}
	req, _ := http.NewRequest("GET", "http://"+h.addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+h.keys["alice"][1])
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("/metrics over TCP with a key: 200")
		}
	}
	lh, err := h.local.Health(ctx)
	if err != nil || len(lh.Backends) == 0 {
		t.Errorf("the operator's health has no probes: %v", err)
	}
	r.Proof = "the unix socket shows the probes"
	r.Evidence = fmt.Sprintf("healthz with a key: %d backends shown; /metrics over TCP: %v", len(hh.Backends), statusOf(resp, err))
}

func statusOf(resp *http.Response, err error) string {
	if err != nil {
		return err.Error()
	}
	return resp.Status
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 160 {
		s = s[:160]
	}
	return s
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

func shortErr(err error) string {
	var ce *client.Error
	if errors.As(err, &ce) {
		return fmt.Sprintf("%d %s", ce.Status, ce.Code)
	}
	if err == nil {
		return "ok"
	}
	return firstLine(err.Error())
}
