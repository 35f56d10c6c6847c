package ocirt

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The attacks a pod tries from inside, first through runc (where each
// works: the baseline proving the attack itself is sound), then through
// the airlock handler (where each must fail).
var podAttacks = []struct {
	name, script string
}{
	{"write the image's /bin (default profile: system dirs read-only)", "echo x > /bin/planted && echo DONE"},
	{"make a device node (CAP_MKNOD, device cgroup)", "mknod /tmp/mem c 1 1 && echo DONE"},
	{"set a set-uid bit", "echo x > /tmp/s && chmod u+s /tmp/s && echo DONE"},
	{"make a user namespace (the kernel's widest attack surface)", "unshare -U true && echo DONE"},
}

const podCommand = "trap 'exit 0' TERM; echo started; echo log-line; while :; do sleep 1; done"

// TestCRIPodThroughAirlockHandler drives a pod through containerd's CRI
// with the airlock runtime handler, as the kubelet does: run the pod
// sandbox, create, start, exec, logs, stop, remove; the container's
// process is confined by Airlock and is the shim's child; escape attempts
// that work under runc fail.
func TestCRIPodThroughAirlockHandler(t *testing.T) {
	c := startContainerd(t)

	// Baseline: the attacks work in a runc pod.
	runcPod := c.crictl(t, "runp", c.podConfig(t, nil))
	runcCtr := c.crictl(t, "create", runcPod, c.containerConfig(t, "base", []string{"sh", "-c", podCommand}, nil), c.podConfig(t, nil))
	c.crictl(t, "start", runcCtr)
	for _, a := range podAttacks {
		out, _ := c.crictlOut("exec", runcCtr, "sh", "-c", a.script)
		if !strings.Contains(out, "DONE") {
			t.Fatalf("baseline (runc): attack %q does not work unconfined, so it proves nothing: %s", a.name, out)
		}
	}
	c.crictl(t, "stopp", runcPod)
	c.crictl(t, "rmp", runcPod)

	podCfg := c.podConfig(t, nil)
	pod := c.crictl(t, "runp", "--runtime", "airlock", podCfg)
	ctr := c.crictl(t, "create", pod, c.containerConfig(t, "app", []string{"sh", "-c", podCommand}, nil), podCfg)
	c.crictl(t, "start", ctr)

	// The container's process is the shim's child, and Airlock's.
	var insp struct {
		Info struct {
			Pid         int    `json:"pid"`
			RuntimeType string `json:"runtimeType"`
		} `json:"info"`
	}
	must(t, json.Unmarshal([]byte(c.crictl(t, "inspect", ctr)), &insp))
	if insp.Info.Pid <= 0 {
		t.Fatalf("no pid in crictl inspect")
	}
	ppid := parentOf(t, insp.Info.Pid)
	if comm := procComm(ppid); comm != "containerd-shim" {
		t.Errorf("container pid %d: parent %d is %q, want the runc shim", insp.Info.Pid, ppid, comm)
	}
	// It joined the pause container's ipc, uts and network namespaces
	// (config.json names them by /proc/PID/ns path), and has its own pid one.
	var sandbox struct {
		Info struct {
			Pid int `json:"pid"`
		} `json:"info"`
	}
	must(t, json.Unmarshal([]byte(c.crictl(t, "inspectp", pod)), &sandbox))
	for _, ns := range []string{"ipc", "uts", "net", "pid"} {
		same := nsOf(t, insp.Info.Pid, ns) == nsOf(t, sandbox.Info.Pid, ns)
		if same != (ns != "pid") {
			t.Errorf("%s namespace shared with the pause container: %v", ns, same)
		}
	}
	status := c.crictl(t, "exec", ctr, "cat", "/proc/self/status")
	if !strings.Contains(status, "NoNewPrivs:\t1") || !strings.Contains(status, "Seccomp:\t2") {
		t.Fatalf("exec'd process is not confined by Airlock (want no_new_privs and a seccomp filter):\n%s", status)
	}
	if eff := field(status, "CapBnd"); eff == "" || mustHex(t, eff)&(1<<27) != 0 {
		t.Errorf("CAP_MKNOD is in the bounding set (%s): above Airlock's ceiling", eff)
	}
	if out := c.crictl(t, "exec", ctr, "echo", "exec-ok"); out != "exec-ok" {
		t.Errorf("exec: %q", out)
	}
	for _, a := range podAttacks {
		out, _ := c.crictlOut("exec", ctr, "sh", "-c", a.script)
		if strings.Contains(out, "DONE") {
			t.Errorf("attack %q worked through the airlock handler: %s", a.name, out)
		}
	}
	// Logs reach the kubelet's log file through the shim.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(c.crictl(t, "logs", ctr), "log-line") {
		if time.Now().After(deadline) {
			t.Fatalf("logs never showed the container's output: %q", c.crictl(t, "logs", ctr))
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.crictl(t, "stop", "-t", "5", ctr)
	var st struct {
		Status struct {
			State    string `json:"state"`
			ExitCode int    `json:"exitCode"`
		} `json:"status"`
	}
	must(t, json.Unmarshal([]byte(c.crictl(t, "inspect", ctr)), &st))
	if st.Status.State != "CONTAINER_EXITED" || st.Status.ExitCode != 0 {
		t.Errorf("after stop: state %s exit %d, want exited 0 (the TERM trap ran)", st.Status.State, st.Status.ExitCode)
	}
	c.crictl(t, "rm", ctr)
	c.crictl(t, "stopp", pod)
	c.crictl(t, "rmp", pod)

	// Nothing of the runtime is left: no state, no cgroup.
	ents, _ := os.ReadDir(filepath.Join(c.dir, "airlock-state", "k8s.io"))
	if len(ents) != 0 {
		t.Errorf("runtime state left behind: %v", ents)
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory/k8s.io/" + ctr); err == nil {
		t.Errorf("cgroup of %s left behind", ctr)
	}
}

func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	must(t, err)
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	n, err := strconv.Atoi(f[1])
	must(t, err)
	return n
}

func procComm(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.TrimSpace(string(b))
}

func field(status, key string) string {
	for _, l := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func mustHex(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 16, 64)
	must(t, err)
	return n
}

func nsOf(t *testing.T, pid int, ns string) string {
	t.Helper()
	l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/" + ns)
	must(t, err)
	return l
}
