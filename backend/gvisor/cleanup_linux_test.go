package gvisor

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// TestMain turns the test binary into the host process that
// TestCleanupAfterCrash kills, when asked to.
func TestMain(m *testing.M) {
	if dir := os.Getenv("GVISOR_CRASH_STATE"); dir != "" {
		crashChild(dir, os.Getenv("GVISOR_CRASH_WS"), os.Getenv("GVISOR_CRASH_ID"))
		return
	}
	os.Exit(m.Run())
}

// crashChild creates a sandbox and waits to be killed.
func crashChild(dir, ws, id string) {
	fail := func(err error) {
		os.Stdout.WriteString("error: " + err.Error() + "\n")
		os.Exit(1)
	}
	p, err := policy.Profile("default")
	if err != nil {
		fail(err)
	}
	p.Filesystem.Workspace = ws
	pol, err := p.Resolve(policy.ResolveEnv{Cwd: ws, Home: "/root", Environ: []string{"PATH=/usr/bin:/bin"}, UID: os.Getuid(), GID: os.Getgid()})
	if err != nil {
		fail(err)
	}
	b := New(Config{AgentBinary: os.Getenv("AIRLOCK_BIN"), StateDir: dir})
	if _, err := b.Create(context.Background(), sandbox.Spec{ID: id, Policy: pol}); err != nil {
		fail(err)
	}
	os.Stdout.WriteString("ready\n")
	time.Sleep(time.Minute)
}

// TestCleanupAfterCrash: the host process dies without destroying its
// sandbox (SIGKILL); its runsc dies with it (Pdeathsig), and Cleanup
// removes the state, cgroup and bundle left behind.
func TestCleanupAfterCrash(t *testing.T) {
	b := testBackend(t)
	ws := workspace(t)
	id := newID(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "GVISOR_CRASH_STATE="+b.cfg.StateDir, "GVISOR_CRASH_WS="+ws, "GVISOR_CRASH_ID="+id, "AIRLOCK_BIN="+testutil.AirlockBinary(t))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "ready" {
				ready <- true
				return
			}
			t.Logf("child: %s", sc.Text())
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			cmd.Wait()
			t.Fatal("child did not create its sandbox")
		}
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatal("child timed out")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if err := leaks(b, id); err == nil {
		t.Fatal("nothing left after the host process was killed: the test proves nothing")
	} else {
		t.Logf("left by the crash: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.Cleanup(ctx, nil); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if err := leaks(b, id); err != nil {
		t.Fatalf("after Cleanup: %v", err)
	}
	if ents, _ := os.ReadDir(ws); len(ents) > 0 {
		t.Fatalf("the workspace holds %d entries after the crash and Cleanup", len(ents))
	}
}
