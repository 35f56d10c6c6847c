package escape

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend/gvisor"
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
		// The same attacks in image sandboxes (own state, cgroup parent
		// and writable layers). gVisor's image root is its usual gofer
		// root with an overlay under it: its conformance and image tests
		// cover it, at half the CI time of a second full run.
		{b: native.New(native.Config{AgentBinary: f.agentBin, StateDir: filepath.Join(f.root, "state-native-image"), CgroupParent: cgroupParent("native-image"), WritableDir: filepath.Join(f.root, "rw-native")}), image: bb},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range list {
		list[i].probe = list[i].b.Probe(ctx)
	}
	return list
}
