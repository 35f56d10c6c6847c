package agent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/sandbox"
)

// naiveInit is a Go program as PID 1 without the agent's protections: it
// starts a child that sends it SIGTERM, then waits. The Go runtime exits on
// SIGTERM (status 2), so the attack works on it.
func naiveInit() int {
	cmd := exec.Command("/bin/sh", "-c", "kill -TERM 1")
	if err := cmd.Run(); err != nil {
		return 3
	}
	time.Sleep(5 * time.Second)
	return 0 // survived
}

// pid1Attr puts a child in new user, pid and mount namespaces, so it is
// PID 1 there (and can mount its own /proc).
func pid1Attr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
}

func TestPID1SignalsFromInside(t *testing.T) {
	testutil.RequireRoot(t)

	// Unconfined: a plain Go init dies when a child sends it SIGTERM.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), modeEnv+"=naive-init")
	cmd.SysProcAttr = pid1Attr()
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("naive init survived SIGTERM from its child (err %v): the attack does not work here", err)
	}

	// The agent as init survives every catchable signal from inside.
	g := startGuest(t, guestOptions{sys: pid1Attr(), extraEnv: []string{"AGENT_TEST_MOUNT_PROC=1"}})
	r := mustRun(t, g.client, sh("echo $PPID"))
	if strings.TrimSpace(r.stdout) != "1" {
		t.Fatalf("agent is not PID 1: parent %q", r.stdout)
	}
	r = mustRun(t, g.client, sh("for s in TERM INT HUP QUIT USR1 USR2 PIPE KILL STOP; do kill -$s 1; done; echo sent"))
	if r.stdout != "sent\n" {
		t.Fatalf("got %+v", r)
	}
	ctx := testCtx(t)
	if err := g.client.Ping(ctx); err != nil {
		t.Fatalf("agent died: %v; stderr:\n%s", err, g.stderr)
	}
	// Processes it starts do not inherit ignored signals: SIGTERM still
	// kills them.
	r = mustRun(t, g.client, sh("kill -TERM $$; sleep 5"))
	if r.status.Signal != 15 {
		t.Fatalf("child inherited an ignored SIGTERM: %+v", r.status)
	}
}

func TestPID1ReapsOrphans(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGuest(t, guestOptions{sys: pid1Attr(), extraEnv: []string{"AGENT_TEST_MOUNT_PROC=1"}})
	ctx := testCtx(t)
	for round := 0; round < 3; round++ {
		// The shell exits at once; cat, blocked on the FIFO, is orphaned
		// and handed to PID 1.
		r := mustRun(t, g.client, sh(fmt.Sprintf("cat %s >/dev/null & echo $!", fifo)))
		pid, err := strconv.Atoi(strings.TrimSpace(r.stdout))
		if err != nil {
			t.Fatalf("got %+v", r)
		}
		statPath := fmt.Sprintf("/proc/%d/stat", pid)
		rc := mustRun(t, g.client, sandbox.ExecRequest{Args: []string{"cat", statPath}})
		f := strings.Fields(rc.stdout[strings.LastIndexByte(rc.stdout, ')')+1:])
		if len(f) < 2 || f[1] != "1" {
			t.Fatalf("orphan's parent is not the agent: %q", rc.stdout)
		}
		// Release the orphan: it exits and must be reaped, not left a zombie.
		mustRun(t, g.client, sh(fmt.Sprintf("echo x > %s", fifo)))
		waitFor(t, func() bool {
			_, err := g.client.Files().Stat(ctx, fmt.Sprintf("/proc/%d", pid))
			return errors.Is(err, sandbox.ErrNotFound)
		})
	}
	// Exec statuses still reach their waiters while orphans are reaped.
	r := mustRun(t, g.client, sh("(sleep 0.1 &); exit 5"))
	if r.status.Code != 5 {
		t.Fatalf("got %+v", r)
	}
}
