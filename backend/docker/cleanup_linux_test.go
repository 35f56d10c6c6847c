package docker

import (
	"bufio"
	"context"
	"fmt"
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
	if dir := os.Getenv("DOCKER_CRASH_STATE"); dir != "" {
		crashChild(dir, os.Getenv("DOCKER_CRASH_WS"), os.Getenv("DOCKER_CRASH_ID"), os.Getenv("DOCKER_CRASH_OWNER"))
		return
	}
	os.Exit(m.Run())
}

// crashChild creates a sandbox (protect_config on: an overlay volume too)
// and waits to be killed.
func crashChild(dir, ws, id, owner string) {
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
	b := New(Config{AgentBinary: os.Getenv("AIRLOCK_BIN"), StateDir: dir, Owner: owner})
	if _, err := b.Create(context.Background(), sandbox.Spec{ID: id, Policy: pol}); err != nil {
		fail(err)
	}
	os.Stdout.WriteString("ready\n")
	time.Sleep(time.Minute)
}

// TestCleanupAfterCrash: the host process dies without destroying its
// sandbox (SIGKILL): the container ends (its init loses its channel and
// exits), but it and its overlay volume stay in the daemon, the state dir
// on disk, until Cleanup removes them. Cleanup of another owner touches none of it.
func TestCleanupAfterCrash(t *testing.T) {
	b := testBackend(t)
	ws := workspace(t)
	id := crashSandbox(t, b, ws)
	if err := leaks(b, id); err == nil {
		t.Fatal("nothing left after the host process was killed: the test proves nothing")
	} else {
		t.Logf("left by the crash: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A create of another owner reclaims nothing of this one.
	other := New(Config{AgentBinary: testutil.AirlockBinary(t), StateDir: t.TempDir(), Owner: fmt.Sprintf("airlock-test-other-%d", os.Getpid())})
	create(t, other, sandbox.Spec{Policy: testPolicy(t, workspace(t), direct)})
	waitReclaimed(t, other)
	if err := leaks(b, id); err == nil {
		t.Fatal("another owner's create reclaimed this owner's container")
	}
	other = New(Config{StateDir: t.TempDir(), Owner: fmt.Sprintf("airlock-test-other-%d", os.Getpid())})
	if err := other.Cleanup(ctx, nil); err != nil {
		t.Fatalf("another owner's Cleanup: %v", err)
	}
	if err := leaks(b, id); err == nil {
		t.Fatal("another owner's Cleanup removed this owner's container")
	}
	if err := b.Cleanup(ctx, map[string]bool{id: true}); err != nil {
		t.Fatalf("Cleanup keeping it: %v", err)
	}
	if err := leaks(b, id); err == nil {
		t.Fatal("Cleanup removed a sandbox it was told to keep")
	}
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

// TestCreateReclaimsDeadRuns: what a killed host process left (its
// container exited with it) is removed by the next create of the same
// owner, as a killed `airlock run` is by the next run.
func TestCreateReclaimsDeadRuns(t *testing.T) {
	b := testBackend(t)
	ws := workspace(t)
	id := crashSandbox(t, b, ws)
	if err := leaks(b, id); err == nil {
		t.Fatal("nothing left after the host process was killed: the test proves nothing")
	}
	fresh := New(Config{AgentBinary: testutil.AirlockBinary(t), StateDir: b.cfg.StateDir, Owner: b.cfg.Owner})
	create(t, fresh, sandbox.Spec{Policy: testPolicy(t, workspace(t), direct)})
	waitReclaimed(t, fresh)
	if err := leaks(b, id); err != nil {
		t.Fatalf("the next create did not reclaim the dead sandbox: %v", err)
	}
	if ents, _ := os.ReadDir(ws); len(ents) > 0 {
		t.Fatalf("the workspace holds %d entries after the crash and Cleanup", len(ents))
	}
}

// containerStatus waits (up to 10 s) for sandbox id's container to stop and
// returns its state.
func containerStatus(t *testing.T, b *Backend, id string) string {
	t.Helper()
	e, err := b.engine()
	if err != nil {
		t.Fatal(err)
	}
	var st string
	for i := 0; i < 100; i++ {
		ins, err := e.ContainerInspect(context.Background(), containerName(id))
		if err != nil {
			return "gone: " + err.Error()
		}
		if st = ins.Status; st != "running" {
			return st
		}
		time.Sleep(100 * time.Millisecond)
	}
	return st
}

// crashSandbox makes a sandbox in a child process and kills the child
// (SIGKILL); it returns the sandbox's ID once its container has exited.
func crashSandbox(t *testing.T, b *Backend, ws string) string {
	t.Helper()
	id := newID(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "DOCKER_CRASH_STATE="+b.cfg.StateDir, "DOCKER_CRASH_WS="+ws, "DOCKER_CRASH_ID="+id,
		"DOCKER_CRASH_OWNER="+b.cfg.Owner, "AIRLOCK_BIN="+testutil.AirlockBinary(t))
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
	// Its container ends with it: the agent's channel closed.
	if st := containerStatus(t, b, id); st != "exited" {
		t.Fatalf("container of the killed host process is %q, want exited", st)
	}
	return id
}

// waitReclaimed waits for b's reclaim of dead sandboxes (started by its
// first create) to finish: what it did is then all it will do.
func waitReclaimed(t *testing.T, b *Backend) {
	t.Helper()
	select {
	case <-b.reclaimed:
	case <-time.After(2 * time.Minute):
		t.Fatal("the reclaim started by the first create did not finish in 2 minutes")
	}
}
