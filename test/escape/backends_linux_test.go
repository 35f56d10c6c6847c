package escape

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/backend/docker"
	"github.com/airlock-dev/airlock/backend/gvisor"
	"github.com/airlock-dev/airlock/backend/microvm"
	"github.com/airlock-dev/airlock/backend/native"
	"github.com/airlock-dev/airlock/backend/wasm"
	"github.com/airlock-dev/airlock/images/imagestest"
)

// cgroupParent is unique per test process: Cleanup sweeps everything under
// its backend's parent, and two runs may share the host.
func cgroupParent(backend string) string {
	return "airlock-escape-" + backend + "-" + strconv.Itoa(os.Getpid())
}

// backendsUnderTest lists every backend this build has, probed. Add each
// new backend here: the suite then runs every attack against it. Each gets
// its own state dir and cgroup parent, so the final Cleanup cannot touch
// sandboxes of anything else running on the host.
func backendsUnderTest(t *testing.T, f *fixture) []backendUnderTest {
	wasmTmp := filepath.Join(f.root, "wasm-tmp")
	must(t, os.MkdirAll(wasmTmp, 0o755))
	bb := imagestest.BusyboxRoot(t)
	list := []backendUnderTest{
		{b: native.New(native.Config{AgentBinary: f.agentBin, StateDir: filepath.Join(f.root, "state-native"), CgroupParent: cgroupParent("native")})},
		{b: gvisor.New(gvisor.Config{AgentBinary: f.agentBin, StateDir: filepath.Join(f.root, "state-gvisor"), CgroupParent: cgroupParent("gvisor")})},
		{b: wasm.New(wasm.Config{TempDir: wasmTmp}), wasm: true},
		{b: docker.New(docker.Config{AgentBinary: f.agentBin, StateDir: filepath.Join(f.root, "state-docker"), Owner: cgroupParent("docker")})},
		{b: microvm.New(microvm.Config{AgentBinary: f.agentBin, StateDir: filepath.Join(f.root, "state-microvm"), CacheDir: filepath.Join(f.root, "microvm-templates"),
			KernelDir: microvmKernel(), CgroupParent: cgroupParent("microvm"), Accel: os.Getenv("AIRLOCK_MICROVM_ACCEL")})},
		// The same attacks in image sandboxes (own state, cgroup parent
		// and writable layers). gVisor's image root is its usual gofer
		// root with an overlay under it: its conformance and image tests
		// cover it, at half the CI time of a second full run.
		{b: native.New(native.Config{AgentBinary: f.agentBin, StateDir: filepath.Join(f.root, "state-native-image"), CgroupParent: cgroupParent("native-image"), WritableDir: filepath.Join(f.root, "rw-native")}), image: bb},
		// And with a host id range, as airlock serve runs them: root
		// inside with its capabilities over its own namespace.
		{b: rootNative(t, f), image: bb, rootCaps: true},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range list {
		list[i].probe = list[i].b.Probe(ctx)
	}
	return list
}

// rootNative is the native backend with the host id ranges airlock serve
// uses as root.
func rootNative(t *testing.T, f *fixture) *native.Backend {
	ids, err := backend.HostIDs("auto")
	if err != nil {
		t.Fatal(err)
	}
	// Its init runs as a range uid: the fixture's root must be searchable
	// (not listable) to reach the agent binary and the workspaces, as a
	// server's directories are. Every other backend runs as host root.
	must(t, os.Chmod(f.root, 0o711))
	return native.New(native.Config{AgentBinary: f.agentBin, StateDir: filepath.Join(f.root, "state-native-root"), CgroupParent: cgroupParent("native-root"),
		WritableDir: filepath.Join(f.root, "rw-native-root"), HostIDs: ids})
}

// microvmKernel is the guest kernel `make guest-kernel` prepared in this
// repository (or $AIRLOCK_MICROVM_DIR's).
func microvmKernel() string {
	if d := os.Getenv("AIRLOCK_MICROVM_DIR"); d != "" {
		return filepath.Join(d, "kernel")
	}
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..", "var", "microvm", "kernel")
}
