package sandboxtest_test

// The conformance suite run against every backend of this tree. A new
// backend adds its Run here (or in its own package) before anything else.

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/airlock-dev/airlock/backend/native"
	"github.com/airlock-dev/airlock/backend/wasm"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/sandbox/sandboxtest"
)

// specFor resolves the default profile with a fresh workspace.
func specFor(t *testing.T) sandbox.Spec {
	ws, err := os.MkdirTemp("/var/tmp", "sbt-ws-")
	if err != nil {
		ws = t.TempDir()
	} else {
		t.Cleanup(func() { os.RemoveAll(ws) })
	}
	p, err := policy.Profile("default")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	rp, err := p.Resolve(policy.ResolveEnv{Cwd: ws, Home: home, Environ: []string{"PATH=/usr/bin:/bin", "HOME=" + home}, UID: os.Getuid(), GID: os.Getgid()})
	if err != nil {
		t.Fatal(err)
	}
	return sandbox.Spec{Policy: rp}
}

func TestConformanceNative(t *testing.T) {
	testutil.RequireLinux(t)
	testutil.RequireRoot(t)
	state := t.TempDir()
	// Own state dir and cgroup parent: lifecycle/cleanup sweeps everything
	// of the backend instance that it is not told to keep.
	parent := "airlock-sbt-" + strconv.Itoa(os.Getpid())
	b := native.New(native.Config{AgentBinary: testutil.AirlockBinary(t), StateDir: state, CgroupParent: parent})
	t.Cleanup(func() {
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + parent)
		for _, d := range append(dirs, "/sys/fs/cgroup/"+parent) {
			os.Remove(d) // empty once every sandbox is gone
		}
	})
	if p := b.Probe(t.Context()); !p.Available {
		testutil.Skip(t, "native backend unavailable: "+p.Reason)
	}
	sandboxtest.Run(t, b, sandboxtest.Options{
		Spec: specFor,
		LeakCheck: func(t *testing.T, id string) error {
			return sandboxtest.HostLeaks(id, state, os.TempDir())
		},
	})
}

func TestConformanceWasm(t *testing.T) {
	tmp := t.TempDir()
	b := wasm.New(wasm.Config{TempDir: tmp, CacheDir: filepath.Join(t.TempDir(), "cache")})
	defer b.Close(t.Context())
	noProc := "WASI preview 1 has no processes: one module instance per exec"
	sandboxtest.Run(t, b, sandboxtest.Options{
		Spec:       specFor,
		HelperGOOS: "wasip1",
		NotApplicable: map[string]string{
			"exec/signal-exit":    "WASI has no signals: a module cannot be killed by one",
			"exec/signal-deliver": "WASI has no signals (Process.Signal returns ErrNotSupported)",
			"exec/pty":            "WASI has no terminals",
			"exec/pty-resize":     "WASI has no terminals",
			"limits/pids":         noProc,
			"net/dial-port":       "WASI preview 1 has no sockets: a module cannot listen",
		},
		LeakCheck: func(t *testing.T, id string) error {
			return sandboxtest.HostLeaks(id, tmp)
		},
	})
}
