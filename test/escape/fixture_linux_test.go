package escape

// The bait the runner plants on the host before the attacks, and the host
// services and processes the attacks aim at. Every hit on a bait service is
// counted, so a sandboxed attack that reaches one is ESCAPED whatever it
// printed.

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
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
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

type fixture struct {
	root       string // /var/tmp/airlock-escape-*: everything else lives here
	home       string // fake $HOME of the host user
	sshKey     string
	hostRC     string // $HOME/.bashrc
	policyCfg  string // $HOME/.config/airlock/policy.yaml
	otherHome  string // /home/airlock-bait-*: another user's home
	otherKey   string
	dataDir    string // /var/lib/airlock-bait-*: the server's data dir
	dataFile   string
	outside    string // a host dir outside every workspace
	etcFile    string // /etc/airlock-escape-*: must never appear
	token      string // bait secret, in every bait file
	agentBin   string // copy of the airlock binary the backends start
	agentSum   string
	standInBin string // another copy, the target of the unconfined replace proof
	attacksBin string

	iface, hostIP       string
	tcpAddr, udpAddr    string
	dnsAddr             string
	loopAddr            string // a host service on 127.0.0.1
	apiLoop, apiHost    string // fake airlock API
	proxyAddr           string // a CONNECT proxy for the unconfined proofs only
	dockerSock, sshSock string
	dbusSock, abstract  string
	handle              string // open_by_handle_at handle of the secret
	handleType          int

	victim, standIn *victim

	mu   sync.Mutex
	hits map[string][]string // service -> what reached it
}

// victim is a host process the process attacks aim at.
type victim struct {
	cmd      *exec.Cmd
	dir      string
	secretFD int
	sockFD   int
}

func (f *fixture) hit(service, what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hits[service] = append(f.hits[service], what)
}

// hitCount is a snapshot of the hit counters.
func (f *fixture) hitCount() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := map[string]int{}
	for k, v := range f.hits {
		m[k] = len(v)
	}
	return m
}

// newHits returns the hits since snapshot before.
func (f *fixture) newHits(before map[string]int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for k, v := range f.hits {
		for _, h := range v[before[k]:] {
			out = append(out, k+": "+h)
		}
	}
	return out
}

func randToken(prefix string) string {
	b := make([]byte, 8)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

func newFixture(t *testing.T, attacksBin string) *fixture {
	t.Helper()
	root, err := os.MkdirTemp("/var/tmp", "airlock-escape-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	f := &fixture{root: root, token: randToken("bait-"), hits: map[string][]string{}}
	f.home = filepath.Join(root, "home")
	f.sshKey = filepath.Join(f.home, ".ssh", "id_rsa")
	f.hostRC = filepath.Join(f.home, ".bashrc")
	f.policyCfg = filepath.Join(f.home, ".config", "airlock", "policy.yaml")
	f.outside = filepath.Join(root, "outside")
	f.etcFile = "/etc/" + randToken("airlock-escape-")
	t.Cleanup(func() { os.Remove(f.etcFile) })

	f.otherHome = mkTemp(t, "/home", "airlock-bait-")
	f.otherKey = filepath.Join(f.otherHome, ".ssh", "id_ed25519")
	f.dataDir = mkTemp(t, "/var/lib", "airlock-bait-")
	f.dataFile = filepath.Join(f.dataDir, "airlock.db")
	f.plant(t)

	// The agent binary the backends start, as a copy an attack may ruin.
	f.agentBin = filepath.Join(root, "bin", "airlock")
	must(t, os.MkdirAll(filepath.Dir(f.agentBin), 0o755))
	must(t, copyFile(agentBinary(t), f.agentBin, 0o755))
	f.agentSum = fileSum(f.agentBin)
	f.standInBin = filepath.Join(root, "bin", "airlock-stand-in")
	must(t, copyFile(f.agentBin, f.standInBin, 0o755))

	f.iface, f.hostIP = hostAddress(t)
	f.tcpAddr = f.serveTCP(t, "tcp", net.JoinHostPort(f.hostIP, "0"))
	f.loopAddr = f.serveTCP(t, "loopback", "127.0.0.1:0")
	f.udpAddr = f.serveUDP(t, "udp", net.JoinHostPort(f.hostIP, "0"), false)
	f.dnsAddr = f.serveUDP(t, "dns", net.JoinHostPort(f.hostIP, "53"), true)
	f.apiLoop = f.serveAPI(t, "127.0.0.1:0")
	f.apiHost = f.serveAPI(t, net.JoinHostPort(f.hostIP, "0"))
	f.proxyAddr = f.serveProxy(t)
	run := filepath.Join(root, "run")
	must(t, os.MkdirAll(filepath.Join(run, "dbus"), 0o755))
	f.dockerSock = f.serveUnix(t, "docker.sock", filepath.Join(run, "docker.sock"))
	f.dbusSock = f.serveUnix(t, "dbus", filepath.Join(run, "dbus", "system_bus_socket"))
	f.sshSock = f.serveUnix(t, "ssh-agent", filepath.Join(f.home, ".ssh", "agent.sock"))
	f.abstract = f.serveUnix(t, "abstract", "@"+randToken("airlock-bait-"))

	f.handle, f.handleType = fileHandle(t, f.dataFile)
	f.victim = startVictim(t, attacksBin, f, "victim")
	f.standIn = startVictim(t, attacksBin, f, "agent-stand-in")
	return f
}

// plant writes (or rewrites, after the unconfined proofs) every bait file.
func (f *fixture) plant(t *testing.T) {
	t.Helper()
	files := map[string]string{
		f.sshKey:    "-----BEGIN OPENSSH PRIVATE KEY-----\n" + f.token + "\n-----END OPENSSH PRIVATE KEY-----\n",
		f.hostRC:    "# host user's bashrc " + f.token + "\n",
		f.policyCfg: "version: 1\nprofile: default\n# " + f.token + "\n",
		f.otherKey:  "other user's key " + f.token + "\n",
		f.dataFile:  "SQLite format 3\x00 server data " + f.token + "\n",
	}
	for p, c := range files {
		must(t, os.MkdirAll(filepath.Dir(p), 0o700))
		must(t, os.WriteFile(p, []byte(c), 0o600))
	}
	os.RemoveAll(f.outside)
	must(t, os.MkdirAll(f.outside, 0o755))
	os.Remove(f.etcFile)
}

// integrity lists every change to the host bait: a written file outside
// the workspaces, a changed bait file, a replaced agent binary.
func (f *fixture) integrity() []string {
	var bad []string
	if ents, _ := os.ReadDir(f.outside); len(ents) > 0 {
		bad = append(bad, fmt.Sprintf("%s now holds %s", f.outside, ents[0].Name()))
	}
	if _, err := os.Lstat(f.etcFile); err == nil {
		bad = append(bad, f.etcFile+" was created")
	}
	for _, p := range []string{f.hostRC, f.policyCfg, f.sshKey} {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), f.token) || strings.Contains(string(b), "airlock-escape") {
			bad = append(bad, p+" was changed")
		}
	}
	if fileSum(f.agentBin) != f.agentSum {
		bad = append(bad, "the agent binary "+f.agentBin+" was changed")
	}
	for _, v := range []*victim{f.victim, f.standIn} {
		for _, m := range []string{"sigusr1", "mem-written"} {
			if b, err := os.ReadFile(filepath.Join(v.dir, m)); err == nil {
				bad = append(bad, fmt.Sprintf("host victim %d: %s (%q)", v.cmd.Process.Pid, m, b))
			}
		}
	}
	return bad
}

// resetVictims clears the victims' markers and restarts dead ones.
func (f *fixture) resetVictims(t *testing.T, attacksBin string) {
	for _, v := range []**victim{&f.victim, &f.standIn} {
		os.Remove(filepath.Join((*v).dir, "sigusr1"))
		os.Remove(filepath.Join((*v).dir, "mem-written"))
		if (*v).cmd.ProcessState != nil || unix.Kill((*v).cmd.Process.Pid, 0) != nil || isZombie((*v).cmd.Process.Pid) {
			(*v).cmd.Process.Kill()
			(*v).cmd.Wait()
			*v = startVictim(t, attacksBin, f, filepath.Base((*v).dir))
		}
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
}

func startVictim(t *testing.T, bin string, f *fixture, name string) *victim {
	t.Helper()
	dir := filepath.Join(f.root, name)
	os.RemoveAll(dir)
	must(t, os.MkdirAll(dir, 0o755))
	cmd := exec.Command(bin, "victim", "dir="+dir, "secret="+f.dataFile, "token="+f.token)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	v := &victim{cmd: cmd, dir: dir}
	for i := 0; ; i++ {
		b, err := os.ReadFile(filepath.Join(dir, "info"))
		if err == nil && strings.Contains(string(b), "sock_fd=") {
			for _, line := range strings.Fields(string(b)) {
				k, val, _ := strings.Cut(line, "=")
				n, _ := strconv.Atoi(val)
				switch k {
				case "secret_fd":
					v.secretFD = n
				case "sock_fd":
					v.sockFD = n
				}
			}
			return v
		}
		if i > 500 {
			t.Fatalf("victim %s did not start", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (f *fixture) serveTCP(t *testing.T, name, addr string) string {
	l, err := net.Listen("tcp", addr)
	must(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				line, _ := bufio.NewReader(c).ReadString('\n')
				f.hit(name, fmt.Sprintf("connection from %s sent %q", c.RemoteAddr(), strings.TrimSpace(line)))
				io.WriteString(c, "ok "+name+"\n")
			}()
		}
	}()
	return l.Addr().String()
}

// serveUDP answers every datagram; as dns it answers like a resolver
// (NXDOMAIN with the query's ID). Port 53 falls back to any port when taken.
func (f *fixture) serveUDP(t *testing.T, name, addr string, dns bool) string {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		host, _, _ := net.SplitHostPort(addr)
		pc, err = net.ListenPacket("udp", net.JoinHostPort(host, "0"))
	}
	must(t, err)
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			msg := buf[:n]
			if dns && n >= 12 {
				f.hit(name, fmt.Sprintf("query from %s for %q", from, dnsName(msg[12:])))
				resp := append([]byte(nil), msg...)
				binary.BigEndian.PutUint16(resp[2:], 0x8183) // response, NXDOMAIN
				pc.WriteTo(resp, from)
				continue
			}
			f.hit(name, fmt.Sprintf("datagram from %s: %q", from, msg))
			pc.WriteTo([]byte("ok "+name), from)
		}
	}()
	return pc.LocalAddr().String()
}

func dnsName(b []byte) string {
	var labels []string
	for len(b) > 0 && b[0] != 0 && int(b[0]) < len(b) {
		labels = append(labels, string(b[1:1+b[0]]))
		b = b[1+b[0]:]
	}
	return strings.Join(labels, ".")
}

// serveAPI is a stand-in for `airlock serve`: it records every request.
func (f *fixture) serveAPI(t *testing.T, addr string) string {
	l, err := net.Listen("tcp", addr)
	must(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
		f.hit("api", fmt.Sprintf("%s %s from %s: %q", r.Method, r.URL.Path, r.RemoteAddr, body))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"sb-new","token":%q}`, f.token)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// serveProxy is a plain CONNECT proxy used only to prove proxy-connect
// unconfined; sandboxes get their backend's proxy at 127.0.0.1:3128.
func (f *fixture) serveProxy(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				if req.Method != http.MethodConnect { // forward proxying
					req.RequestURI = ""
					resp, err := http.DefaultTransport.RoundTrip(req)
					if err != nil {
						io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
						return
					}
					defer resp.Body.Close()
					resp.Write(c)
					return
				}
				up, err := net.Dial("tcp", req.Host)
				if err != nil {
					io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
					return
				}
				defer up.Close()
				io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
				go io.Copy(up, br)
				io.Copy(c, up)
			}()
		}
	}()
	return l.Addr().String()
}

func (f *fixture) serveUnix(t *testing.T, name, path string) string {
	l, err := net.Listen("unix", path)
	must(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			f.hit(name, "connection to "+path)
			io.WriteString(c, "bait "+name+" "+f.token+"\n")
			c.Close()
		}
	}()
	return path
}

// hostAddress returns the first non-loopback interface with an IPv4 address.
func hostAddress(t *testing.T) (string, string) {
	ifs, err := net.Interfaces()
	must(t, err)
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 || i.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				return i.Name, ipn.IP.String()
			}
		}
	}
	t.Fatal("escape: the host has no non-loopback IPv4 address to plant network bait on")
	return "", ""
}

// fileHandle takes the host's file handle of path for open_by_handle_at.
func fileHandle(t *testing.T, path string) (string, int) {
	h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, path, 0)
	must(t, err)
	return hex.EncodeToString(h.Bytes()), int(h.Type())
}

func mkTemp(t *testing.T, dir, prefix string) string {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o755))
	d, err := os.MkdirTemp(dir, prefix)
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func copyFile(from, to string, mode os.FileMode) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, mode)
}

func fileSum(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return "missing: " + err.Error()
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
