package escape

// Running one attack: unconfined on the host (the proof), or inside a
// sandbox of one backend (the verdict).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/egress"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"

	"github.com/airlock-dev/airlock/images"
)

// Verdicts.
const (
	Blocked = "blocked"
	Escaped = "ESCAPED"
	NA      = "n/a"
	Error   = "error"
)

// result is one attack on one backend.
type result struct {
	Verdict  string              `json:"verdict"`
	Evidence string              `json:"evidence"`
	Exit     *sandbox.ExitStatus `json:"exit,omitempty"`
}

// proof is the unconfined run of an attack on the host.
type proof struct {
	Proven   bool   `json:"proven"`
	NA       bool   `json:"not_applicable_on_host,omitempty"` // the host lacks the target (e.g. no module loader)
	Evidence string `json:"evidence"`
}

const (
	attackTimeout = 3 * time.Minute // safety net for one attack run
	outputKeep    = 16 << 10        // bytes of output kept as evidence
)

// boundedBuffer keeps the first outputKeep bytes and counts the rest.
type boundedBuffer struct {
	buf bytes.Buffer
	n   int64
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.n += int64(len(p))
	if room := outputKeep - b.buf.Len(); room > 0 {
		if len(p) > room {
			b.buf.Write(p[:room])
		} else {
			b.buf.Write(p)
		}
	}
	return len(p), nil
}

// verdictLine returns the attack's ESCAPED/BLOCKED/ERROR/N/A line, looked
// for in stderr then stdout; without one, the tail of stderr.
func verdictLine(stdout, stderr string) string {
	for _, out := range []string{stderr, stdout} {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		for i := len(lines) - 1; i >= 0; i-- {
			for _, p := range []string{"ESCAPED: ", "BLOCKED: ", "ERROR: ", "N/A: "} {
				if j := strings.Index(lines[i], p); j >= 0 {
					return strings.TrimSpace(lines[i][j:])
				}
			}
		}
	}
	if s := strings.TrimSpace(stderr); s != "" {
		if len(s) > 300 {
			s = s[len(s)-300:]
		}
		return s
	}
	return fmt.Sprintf("no verdict printed (%d bytes of output)", len(stdout))
}

// prepareWorkspace makes a fresh workspace with the files a sandbox must not
// be able to turn against the user (existing protected config).
func prepareWorkspace(dir string) error {
	files := map[string]string{
		// Repositories below the root, for the planting attacks.
		"a/.git/HEAD":               "ref: refs/heads/main\n",
		"a/.git/config":             "[core]\n",
		"a/.git/hooks/README":       "hooks\n",
		"a/.git/objects/README":     "objects\n",
		"a/.git/refs/README":        "refs\n",
		"a/b/c/.git/HEAD":           "ref: refs/heads/main\n",
		"a/b/c/.git/config":         "[core]\n",
		"a/b/c/.git/hooks/README":   "hooks\n",
		"a/b/c/.git/objects/README": "objects\n",
		"a/b/c/.git/refs/README":    "refs\n",
		".git/HEAD":                 "ref: refs/heads/main\n",
		".git/config":               "[core]\n\trepositoryformatversion = 0\n",
		".git/hooks/pre-commit":     "#!/bin/sh\nexit 0\n",
		".bashrc":                   "# project bashrc\n",
		".claude/settings.json":     "{}\n",
		"README.md":                 "workspace\n",
	}
	for rel, c := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// protectedNew are protected paths the workspace starts without.
var protectedNew = []string{".git/hooks/post-checkout", ".git/hooks/post-merge", ".zshrc", ".vscode/settings.json"}

// workspaceChanges lists changes to the workspace's protected files.
func workspaceChanges(dir string) []string {
	var bad []string
	for rel, want := range map[string]string{
		".git/config":           "[core]\n\trepositoryformatversion = 0\n",
		".git/hooks/pre-commit": "#!/bin/sh\nexit 0\n",
		".bashrc":               "# project bashrc\n",
		".claude/settings.json": "{}\n",
	} {
		// Removing or moving a protected file away is not an escape
		// (nothing runs it); changing it is.
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err == nil && string(b) != want {
			bad = append(bad, rel+" was modified")
		}
	}
	for _, rel := range protectedNew {
		if _, err := os.Lstat(filepath.Join(dir, rel)); err == nil {
			bad = append(bad, rel+" was created")
		}
	}
	return bad
}

// baitEnviron is the host environment the sandboxes are resolved from: it
// carries secrets that must never reach a sandbox.
func (f *fixture) baitEnviron() []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
		"HOME=" + f.home, "USER=root", "LANG=C.UTF-8",
		"GITHUB_TOKEN=" + f.token, "AWS_SECRET_ACCESS_KEY=" + f.token,
		"SSH_AUTH_SOCK=" + f.sshSock, "AIRLOCK_BAIT=" + f.token,
	}
}

func (f *fixture) victimPid() string { return strconv.Itoa(f.victim.cmd.Process.Pid) }

// marker reports a victim's marker file (it was signalled or written to).
// The victim notices within its 20 ms poll; this waits up to 2 s for it.
func (f *fixture) marker(name string) (bool, string) {
	for i := 0; i < 100; i++ {
		if b, err := os.ReadFile(filepath.Join(f.victim.dir, name)); err == nil {
			return true, fmt.Sprintf("victim %d: %s %q", f.victim.cmd.Process.Pid, name, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false, "victim has no " + name + " marker"
}

// overLimit says whether an exhaustion attack that was stopped got past
// the policy's own limit first (stopped only by something else, e.g. the
// host process's descriptor limit).
func overLimit(name, line string, p *policy.Policy) string {
	num := func(after string) int64 {
		i := strings.Index(line, after)
		if i < 0 {
			return -1
		}
		f := strings.Fields(line[i+len(after):])
		if len(f) == 0 {
			return -1
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return -1
		}
		return n
	}
	switch name {
	case "fd-exhaustion":
		if n := num("after "); p.Limits.OpenFiles > 0 && n > int64(p.Limits.OpenFiles) {
			return fmt.Sprintf("held %d descriptors, over the policy's open_files limit %d", n, p.Limits.OpenFiles)
		}
	case "fork-bomb":
		if n := num("after "); p.Limits.Pids > 0 && n > int64(p.Limits.Pids) {
			return fmt.Sprintf("forked %d processes, over the policy's pids limit %d", n, p.Limits.Pids)
		}
	case "disk-fill-tmp":
		if n := num("after "); p.Limits.DiskBytes > 0 && n<<20 > int64(p.Limits.DiskBytes)+1<<20 {
			return fmt.Sprintf("wrote %d MiB to /tmp, over the policy's disk limit %d MiB", n, int64(p.Limits.DiskBytes)>>20)
		}
	}
	return ""
}

// sleepers finds (and kills) host processes whose command line holds token.
func sleepers(token string) []string {
	var found []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if bytes.Contains(b, []byte(token)) && !isZombie(pid) {
			found = append(found, fmt.Sprintf("pid %d %q", pid, bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return found
}

// runUnconfined proves a on the host: it must escape there.
func (r *runner) runUnconfined(t *testing.T, a attackDef) proof {
	f := r.f
	dir := filepath.Join(f.root, "unconfined", a.name)
	if err := prepareWorkspace(dir); err != nil {
		t.Fatal(err)
	}
	s := &side{ws: dir, token: randToken("sleeper-"), f: f}
	if a.neighbour {
		s.neighbourSecret = filepath.Join(f.root, "unconfined", a.name+"-neighbour", "secret.txt")
		must(t, os.MkdirAll(filepath.Dir(s.neighbourSecret), 0o755))
		must(t, os.WriteFile(s.neighbourSecret, []byte("neighbour "+f.token), 0o600))
	}
	if a.setup != nil {
		if err := a.setup(s); err != nil {
			return proof{Evidence: "setup: " + err.Error()}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), attackTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.attacksBin, append([]string{a.cmd}, a.args(s)...)...)
	cmd.Dir, cmd.Env = dir, f.baitEnviron()
	var out, errOut boundedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if a.tty {
		pty, tty, err := openPTY()
		if err != nil {
			return proof{Evidence: "open a pty: " + err.Error()}
		}
		defer pty.Close()
		defer tty.Close()
		cmd.Stdin = tty
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
	before := f.hitCount()
	err := cmd.Start()
	if err == nil {
		stop := make(chan struct{})
		var wrote atomic.Int64
		if a.race {
			go raceWrites(stop, &wrote, func(i int) error {
				return os.WriteFile(filepath.Join(dir, "race", fmt.Sprintf("pwned-%d", i)), []byte("airlock-escape"), 0o644)
			})
		}
		err = cmd.Wait()
		close(stop)
	}
	if a.outlive {
		time.Sleep(200 * time.Millisecond) // let the detached child exec
	}
	s.hits = f.newHits(before)
	line := verdictLine(out.buf.String(), errOut.buf.String())
	code := -1
	var ee *exec.ExitError
	if err == nil {
		code = 0
	} else if errors.As(err, &ee) {
		code = ee.ExitCode()
	}
	p := proof{Evidence: line}
	switch {
	case code == 3:
		p.NA = true
	case code != 0:
		p.Evidence = fmt.Sprintf("exit %d: %s", code, line)
	case a.outlive:
		left := sleepers(s.token)
		p.Proven = len(left) > 0
		if p.Proven {
			p.Evidence = line + "; on the host afterwards: " + left[0]
		} else {
			p.Evidence = line + "; but no sleeper found on the host"
		}
	case a.check != nil:
		ok, ev := a.check(s)
		p.Proven = ok
		p.Evidence = line + "; host check: " + ev
	default:
		p.Proven = true
	}
	return p
}

// openPTY opens a pseudo-terminal pair without cgo.
func openPTY() (*os.File, *os.File, error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	unlock := 0
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, m.Fd(), unix.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		m.Close()
		return nil, nil, e
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return m, s, nil
}

// spec builds the sandbox spec of one run: the default profile resolved
// against the bait environment, with ws as workspace.
//
// With allowlist the sandbox gets network through its egress proxy (the
// real one, Proxy.Attach) allowed to one outside name only: the network
// attacks then have a proxy to bypass or abuse.
func (r *runner) spec(t *testing.T, ws string, allowlist bool, image *images.Rootfs) sandbox.Spec {
	p, err := policy.Profile("default")
	if err != nil {
		t.Fatal(err)
	}
	if allowlist {
		p.Network = policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{"example.com:443"}}
	}
	if image != nil {
		// The workspace where it is on the host: the attacks name their
		// targets by host paths.
		p.Filesystem.WorkspaceMount = ws
		if err := image.Apply(p); err != nil {
			t.Fatal(err)
		}
	}
	rp, err := p.Resolve(policy.ResolveEnv{Cwd: ws, Home: r.f.home, Environ: r.f.baitEnviron(), UID: os.Getuid(), GID: os.Getgid()})
	if err != nil {
		t.Fatal(err)
	}
	spec := sandbox.Spec{ID: randToken("esc-")[:16], Policy: rp}
	if image != nil {
		spec.Image, spec.Root = rp.Filesystem.Image, image.SandboxRoot()
	}
	if allowlist {
		px, err := egress.New(egress.Config{SandboxID: spec.ID, Network: rp.Network, Secrets: rp.Secrets})
		if err != nil {
			t.Fatalf("egress proxy: %v", err)
		}
		bundle, _ := egress.SystemBundle() // nil: the sandbox trusts only its CA
		px.Attach(&spec, bundle)
	}
	return spec
}

// runInside tries a inside a new sandbox of b.
func (r *runner) runInside(t *testing.T, bk backendUnderTest, a attackDef) result {
	f := r.f
	if bk.wasm && a.wasi != "yes" {
		return result{Verdict: NA, Evidence: a.wasi}
	}
	dir := filepath.Join(f.root, "ws", bk.name(), a.name)
	if err := prepareWorkspace(dir); err != nil {
		t.Fatal(err)
	}
	s := &side{inside: true, ws: dir, token: randToken("sleeper-"), f: f, rootCaps: bk.rootCaps}
	if a.setup != nil {
		if err := a.setup(s); err != nil {
			return result{Verdict: Error, Evidence: "setup: " + err.Error()}
		}
	}
	bin := filepath.Join(dir, ".escape-attacks")
	src := r.attacksBin
	if bk.wasm {
		bin += ".wasm"
		src = r.attacksWasm
	}
	if err := copyFile(src, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), attackTimeout)
	defer cancel()

	var neighbour *ready
	if a.exhaust || a.neighbour {
		nb, err := r.createReady(ctx, t, bk)
		if err != nil {
			return result{Verdict: Error, Evidence: "neighbour sandbox: " + err.Error()}
		}
		defer nb.Destroy(context.Background())
		neighbour = nb
		s.neighbourSecret = filepath.Join(filepath.Dir(nb.bin), "secret.txt")
		if err := os.WriteFile(s.neighbourSecret, []byte("neighbour "+f.token), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	spec := r.spec(t, dir, a.allowlist, bk.image)
	spec.OwnWorkspace = bk.rootCaps // the range's root owns it, as on a server
	if a.pinned != nil {
		spec.Pinned = map[string]string{a.pinned(s): "the policy file"}
	}
	sb, err := bk.b.Create(ctx, spec)
	if err != nil {
		return result{Verdict: Error, Evidence: "create sandbox: " + err.Error()}
	}
	destroyed := false
	defer func() {
		if !destroyed {
			sb.Destroy(context.Background())
		}
	}()
	before := f.hitCount()
	var out, errOut boundedBuffer
	req := sandbox.ExecRequest{Args: append([]string{bin, a.cmd}, a.args(s)...), Dir: dir, Stdout: &out, Stderr: &errOut, Timeout: 2 * time.Minute}
	res := result{}
	p, err := sb.Exec(ctx, req)
	if err != nil {
		return result{Verdict: Error, Evidence: "exec: " + err.Error()}
	}
	stop := make(chan struct{})
	var raced atomic.Int64
	if a.race {
		go raceWrites(stop, &raced, func(i int) error {
			name := filepath.Join(dir, "race", fmt.Sprintf("pwned-%d", i))
			err := sb.Files().WriteFile(ctx, name, strings.NewReader("airlock-escape"), 0o644, false)
			sb.Files().Mkdir(ctx, name+".d", 0o755, false)
			return err
		})
	}
	st, werr := p.Wait(ctx)
	close(stop)
	res.Exit = &st
	if sy, ok := sb.(sandbox.Syncer); ok {
		// The backend held writes to host paths in an overlay: what it
		// writes back is what reaches the host.
		if _, err := sy.Sync(ctx); err != nil {
			t.Logf("%s: write-back: %v", a.name, err)
		}
	}

	line := verdictLine(out.buf.String(), errOut.buf.String())
	switch {
	case werr != nil:
		res.Verdict, res.Evidence = Error, "wait: "+werr.Error()
	case st.Code == 0 && (a.outlive || a.check != nil):
		// Decided by host evidence below: a write that landed in the
		// sandbox's own copy of a path (a private home, a tmpfs) is not
		// an escape.
		res.Verdict, res.Evidence = Blocked, "the host shows no effect: the attack acted on the sandbox's own view (it reported: "+strings.TrimPrefix(line, "ESCAPED: ")+")"
	case st.Code == 0:
		res.Verdict, res.Evidence = Escaped, line
	case st.Code == 1:
		res.Verdict, res.Evidence = Blocked, line
	case st.Code == 3:
		res.Verdict, res.Evidence = NA, line
	case a.exhaust && st.Code == 1:
		res.Verdict, res.Evidence = Blocked, line
	case a.exhaust:
		res.Verdict, res.Evidence = Blocked, fmt.Sprintf("stopped (exit %d, signal %d, oom %v): %s", st.Code, st.Signal, st.OOM, line)
	default:
		res.Verdict, res.Evidence = Error, fmt.Sprintf("exit %d signal %d: %s", st.Code, st.Signal, line)
	}
	if a.exhaust && res.Verdict == Blocked {
		if over := overLimit(a.name, line, spec.Policy); over != "" {
			res.Verdict, res.Evidence = Escaped, over+" ("+line+")"
		}
	}
	if a.name == "output-flood" {
		limit := int64(spec.Policy.Limits.OutputBytes)
		got := out.n + errOut.n
		if limit == 0 || got > limit {
			res.Verdict, res.Evidence = Escaped, fmt.Sprintf("host received %d bytes of output (limit %d)", got, limit)
		} else {
			res.Verdict, res.Evidence = Blocked, fmt.Sprintf("host received %d bytes, the limit (%d), truncated=%v; %s", got, limit, st.Truncated, line)
		}
	}

	// The sandbox itself must have survived (the agent is the target of
	// the self-defence attacks; exhaustion must not kill it either).
	if err := r.ping(ctx, sb, bk, bin); err != nil && a.category == "self-defence" && !a.exhaust {
		res.Verdict, res.Evidence = Escaped, "the sandbox's agent stopped answering after the attack: "+err.Error()+"; "+res.Evidence
	} else if err != nil {
		res.Evidence += "; sandbox unusable afterwards: " + err.Error()
	}

	if err := sb.Destroy(ctx); err != nil {
		res.Evidence += "; destroy: " + err.Error()
	}
	destroyed = true
	if a.outlive {
		time.Sleep(200 * time.Millisecond)
		if left := sleepers(s.token); len(left) > 0 {
			res.Verdict, res.Evidence = Escaped, "survived destroy: "+strings.Join(left, ", ")
		} else if st.Code == 0 {
			res.Evidence = "nothing of it left on the host after destroy (the attack had reported: " + strings.TrimPrefix(line, "ESCAPED: ") + ")"
		}
	}

	// Host-side evidence overrides what the attack printed.
	s.hits = f.newHits(before)
	var escapes []string
	if len(s.hits) > 0 {
		escapes = append(escapes, "bait service reached: "+strings.Join(s.hits, "; "))
	}
	escapes = append(escapes, f.integrity()...)
	escapes = append(escapes, workspaceChanges(dir)...)
	if a.check != nil {
		if ok, ev := a.check(s); ok {
			escapes = append(escapes, ev)
		}
	}
	if a.exhaust {
		escapes = append(escapes, r.health(t, bk, neighbour)...)
	}
	if len(escapes) > 0 {
		res.Verdict = Escaped
		res.Evidence = strings.Join(dedupe(escapes), "; ") + " (attack output: " + line + ")"
		f.plant(t)
		f.resetVictims(t, r.attacksBin)
		if fileSum(f.agentBin) != f.agentSum {
			must(t, copyFile(agentBinary(t), f.agentBin, 0o755))
		}
	}
	if a.race {
		res.Evidence += fmt.Sprintf("; the Files API wrote %d files during the race", raced.Load())
	}
	return res
}

// raceWrites calls write with a growing index until stop is closed and
// counts the writes that succeeded in ok (proof the race was exercised).
func raceWrites(stop <-chan struct{}, ok *atomic.Int64, write func(i int) error) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		if write(i) == nil {
			ok.Add(1)
		}
	}
}

// ready is a sandbox with the attacks binary in its workspace.
type ready struct {
	sandbox.Sandbox
	bin string
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		s = strings.TrimPrefix(s, "workspace: ")
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// createReady creates a sandbox of bk with the attacks binary in its
// workspace, for pings.
func (r *runner) createReady(ctx context.Context, t *testing.T, bk backendUnderTest) (*ready, error) {
	dir, err := os.MkdirTemp(filepath.Join(r.f.root), "neighbour-")
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, ".escape-attacks")
	src := r.attacksBin
	if bk.wasm {
		bin, src = bin+".wasm", r.attacksWasm
	}
	if err := copyFile(src, bin, 0o755); err != nil {
		return nil, err
	}
	spec := r.spec(t, dir, false, bk.image)
	spec.OwnWorkspace = bk.rootCaps
	sb, err := bk.b.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	if err := r.ping(ctx, sb, bk, bin); err != nil {
		sb.Destroy(context.Background())
		return nil, err
	}
	return &ready{Sandbox: sb, bin: bin}, nil
}

// ping runs the attacks binary's ping in sb.
func (r *runner) ping(ctx context.Context, sb sandbox.Sandbox, bk backendUnderTest, bin string) error {
	var out bytes.Buffer
	p, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{bin, "ping"}, Stdout: &out})
	if err != nil {
		return err
	}
	st, err := p.Wait(ctx)
	if err != nil {
		return err
	}
	if st.Code != 0 || !strings.Contains(out.String(), "pong") {
		return fmt.Errorf("ping: status %+v output %q", st, out.String())
	}
	return nil
}

// health checks, after an exhaustion attack, that the host still spawns
// processes, the neighbour sandbox still works and a new one can be made.
func (r *runner) health(t *testing.T, bk backendUnderTest, neighbour *ready) []string {
	var bad []string
	if out, err := exec.Command("/bin/sh", "-c", "echo host-ok").CombinedOutput(); err != nil || !strings.Contains(string(out), "host-ok") {
		bad = append(bad, fmt.Sprintf("the host cannot spawn processes: %v %q", err, out))
	}
	ctx, cancel := context.WithTimeout(context.Background(), attackTimeout)
	defer cancel()
	if neighbour != nil {
		if err := r.ping(ctx, neighbour, bk, neighbour.bin); err != nil {
			bad = append(bad, "the neighbour sandbox stopped working: "+err.Error())
		}
	}
	sb, err := r.createReady(ctx, t, bk)
	if err != nil {
		bad = append(bad, "no new sandbox after the attack: "+err.Error())
	} else {
		sb.Destroy(ctx)
	}
	return bad
}
