package gvisor

import (
	"os"
	"testing"
)

func TestDumpBundle(t *testing.T) {
	dir := os.Getenv("DUMP_DIR")
	if dir == "" {
		t.Skip()
	}
	ws := "/tmp/gvx/ws"
	os.MkdirAll(ws, 0o755)
	pol := testPolicy(t, ws, nil)
	os.MkdirAll(dir, 0o755)
	plan, err := planMounts(planInput{Policy: pol, Bundle: dir, UID: 0, GID: 0})
	if err != nil {
		t.Fatal(err)
	}
	for i := range plan.Mounts {
		if plan.Mounts[i].Destination == AgentPath {
			plan.Mounts[i].Source = "/tmp/gvx/airlock"
		}
	}
	spec := buildSpec(specInput{ID: "x", Policy: pol, Cgroup: "/airlock-gvisor/x", Mounts: plan.Mounts})
	spec.Process.Args = []string{"/bin/true"}
	if err := writeBundle(dir, spec, plan); err != nil {
		t.Fatal(err)
	}
}
