package kube

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/internal/testutil/kubecluster"
)

// childEnv makes this test binary a child that starts a cluster, runs a
// pod on it, says "UP <dir>" and waits to be killed (TestMain).
const childEnv = "AIRLOCK_KUBE_TEST_CHILD"

// clusterChild is the child's body: it never stops its cluster.
func clusterChild() {
	airlock := os.Getenv(childEnv)
	c, err := kubecluster.Start(context.Background(), kubecluster.Options{Airlock: airlock})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	if err := c.Apply(context.Background(), string(podSpec("guarded", "airlock", kubecluster.ImageBusybox, []string{"sleep", "1000"}, nil))); err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := waitReady(ctx, c, "guarded"); err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	fmt.Println("UP", c.Dir)
	select {}
}

// TestGuardRestoresAfterKill: a test binary killed with its cluster up
// (what a test timeout's panic amounts to: no cleanup runs) leaves the
// host as before all the same: the guard tears the cluster down. This
// file sorts before the tests that use the shared cluster.
func TestGuardRestoresAfterKill(t *testing.T) {
	kubecluster.Require(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+testutil.AirlockBinary(t))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	dir, ok := strings.CutPrefix(strings.TrimSpace(line), "UP ")
	if err != nil || !ok {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("child cluster: %q %v", line, err)
	}
	// The host as the child's cluster recorded it, under the lock.
	var st struct{ Before *kubecluster.HostState }
	b, err := os.ReadFile(dir + ".state")
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil || st.Before == nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the child cluster's state %s.state: %v", dir, err)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	// The guard removes the state file when it is done.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(dir + ".state"); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the guard did not finish tearing down %s in 2 minutes", dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
	after := lockedSnapshot(t)
	if d := st.Before.Diff(after); len(d) > 0 {
		t.Fatalf("host differs after the guard's teardown:\n%s", strings.Join(d, "\n"))
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cluster dir %s left behind: %v", dir, err)
	}
	if pids := kubecluster.ProcessesUnder(dir); len(pids) > 0 {
		t.Errorf("processes of the killed cluster left: %v", pids)
	}
}
