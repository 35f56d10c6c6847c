package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/backend/internal/backendtest"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/sandbox/sandboxtest"
)

var idSeq atomic.Int64

func newID(t testing.TB) string {
	return fmt.Sprintf("dk%d-%d", os.Getpid(), idSeq.Add(1))
}

// testBackend returns a backend with its own state dir and owner label (so
// its Cleanup never touches another test process's containers). Without a
// daemon it skips (fails in CI).
func testBackend(t testing.TB) *Backend {
	t.Helper()
	testutil.RequireLinux(t)
	testutil.RequireRoot(t)
	dir, err := os.MkdirTemp("", "dkt-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b := New(Config{AgentBinary: testutil.AirlockBinary(t), StateDir: dir, Owner: fmt.Sprintf("airlock-test-%d", os.Getpid())})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if p := b.Probe(ctx); !p.Available {
		testutil.Skip(t, "docker backend unavailable: "+p.Reason)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := b.Cleanup(ctx, nil); err != nil {
			t.Errorf("final cleanup: %v", err)
		}
	})
	return b
}

// testPolicy resolves the default profile with ws as workspace and applies
// edit before resolving.
func testPolicy(t testing.TB, ws string, edit func(p *policy.Policy)) *policy.Policy {
	t.Helper()
	return backendtest.Policy(t, ws, edit)
}

// direct turns protect_config off: the workspace is written in place.
func direct(p *policy.Policy) { backendtest.Direct(p) }

func workspace(t testing.TB) string { t.Helper(); return backendtest.Workspace(t) }

// create makes a sandbox and destroys it when t ends.
func create(t testing.TB, b *Backend, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	if spec.ID == "" {
		spec.ID = newID(t)
	}
	return backendtest.Create(t, b, spec, 60*time.Second)
}

// sh runs a shell snippet in sb through the agent and returns its status
// and combined output.
func sh(t testing.TB, sb sandbox.Sandbox, script string) (sandbox.ExitStatus, string) {
	t.Helper()
	return backendtest.Sh(t, sb, script, 60*time.Second)
}

// leaks reports what sandbox id left: a container or volume in the daemon,
// its state dir, processes or mounts naming it.
func leaks(b *Backend, id string) error {
	var found []string
	e, err := b.engine()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f := []string{LabelSandbox + "=" + id}
	if list, err := e.ContainerList(ctx, f, nil); err != nil {
		found = append(found, "cannot list containers: "+err.Error())
	} else if len(list) > 0 {
		found = append(found, fmt.Sprintf("%d containers (%s)", len(list), list[0].State))
	}
	if vols, err := e.VolumeList(ctx, f); err != nil {
		found = append(found, "cannot list volumes: "+err.Error())
	} else if len(vols) > 0 {
		found = append(found, fmt.Sprintf("%d volumes", len(vols)))
	}
	if _, err := os.Stat(b.stateDir(id)); err == nil {
		found = append(found, "state "+b.stateDir(id))
	}
	if err := sandboxtest.HostLeaks(id, b.cfg.StateDir); err != nil {
		found = append(found, err.Error())
	}
	if len(found) > 0 {
		return fmt.Errorf("%s", strings.Join(found, "; "))
	}
	return nil
}

var (
	busyboxOnce sync.Once
	busyboxRef  string
	busyboxErr  error
)

// busyboxImage imports (once per daemon and busybox build) an image made
// of Debian's static busybox: /bin/busybox and a link per applet.
func busyboxImage(t testing.TB, b *Backend) string {
	t.Helper()
	busyboxOnce.Do(func() { busyboxRef, busyboxErr = makeBusyboxImage(b) })
	if busyboxErr != nil {
		if testutil.InCI() {
			t.Fatalf("busybox image: %v", busyboxErr)
		}
		testutil.Skip(t, "busybox image: "+busyboxErr.Error())
	}
	return busyboxRef
}

func makeBusyboxImage(b *Backend) (string, error) {
	bin, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return "", fmt.Errorf("%v (install busybox-static)", err)
	}
	if !bytes.Contains(bin[:min(len(bin), 4096)], []byte("\x7fELF")) {
		return "", fmt.Errorf("/bin/busybox is not an ELF binary")
	}
	if out, _ := exec.Command("file", "/bin/busybox").Output(); len(out) > 0 && !bytes.Contains(out, []byte("static")) {
		return "", fmt.Errorf("/bin/busybox is not static (install busybox-static): %s", out)
	}
	sum := sha256.Sum256(bin)
	ref := "airlock-test/busybox:" + hex.EncodeToString(sum[:6])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, err := b.engine()
	if err != nil {
		return "", err
	}
	if _, err := e.ImageInspect(ctx, ref); err == nil {
		return ref, nil
	}
	list, err := exec.Command("/bin/busybox", "--list-full").Output()
	if err != nil {
		return "", fmt.Errorf("busybox --list-full: %v", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"bin/", "sbin/", "usr/", "usr/bin/", "usr/sbin/", "etc/", "tmp/", "root/", "home/"} {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755})
	}
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(bin))})
	tw.Write(bin)
	for _, f := range []struct{ name, data string }{
		{"etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"},
		{"etc/group", "root:x:0:\nnogroup:x:65534:\n"},
	} {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data))})
		io.WriteString(tw, f.data)
	}
	for _, l := range strings.Fields(string(list)) {
		if l == "bin/busybox" || !strings.Contains(l, "/") {
			continue
		}
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: l, Linkname: "/bin/busybox", Mode: 0o777})
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if _, err := b.Import(ctx, &buf, ref, []string{"ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin"}); err != nil {
		return "", err
	}
	return ref, nil
}

// eventLog collects audit events.
type eventLog struct {
	mu     sync.Mutex
	events []audit.Event
}

func (l *eventLog) Emit(e audit.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) count(typ string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e.Type == typ {
			n++
		}
	}
	return n
}
