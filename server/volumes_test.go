package server

import (
	"errors"
	"testing"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/admission"
)

func TestCheckVolumeMounts(t *testing.T) {
	t.Parallel()
	pol := &policy.Policy{Filesystem: policy.Filesystem{Workspace: "/srv/ws/sb-1", WorkspaceMount: "/workspace"}}
	ceil := &admission.Ceiling{VolumePaths: []string{"/data"}}
	m := func(name, p string) []api.VolumeMount { return []api.VolumeMount{{Name: name, Path: p}} }
	for _, c := range []struct {
		name    string
		reqs    []api.VolumeMount
		backend string
		ceil    *admission.Ceiling
		want    error
	}{
		{"fine", m("v", "/data/v"), "native", ceil, nil},
		{"no ceiling", m("v", "/srv/v"), "native", nil, nil},
		{"outside the ceiling", m("v", "/srv/v"), "native", ceil, sandbox.ErrPermission},
		{"proc", m("v", "/proc/self"), "native", nil, sandbox.ErrInvalid},
		{"root", m("v", "/"), "native", nil, sandbox.ErrInvalid},
		{"dotdot", m("v", "/data/../etc"), "native", nil, sandbox.ErrInvalid},
		{"trailing slash", m("v", "/data/"), "native", nil, sandbox.ErrInvalid},
		{"relative", m("v", "data"), "native", nil, sandbox.ErrInvalid},
		{"over the workspace", m("v", "/workspace"), "native", nil, sandbox.ErrInvalid},
		{"under the workspace", m("v", "/workspace/x"), "native", nil, sandbox.ErrInvalid},
		{"above the workspace", m("v", "/work"), "native", nil, nil},
		{"bad name", m("V/x", "/data/v"), "native", nil, sandbox.ErrInvalid},
		{"nested", []api.VolumeMount{{Name: "a", Path: "/data"}, {Name: "b", Path: "/data/b"}}, "native", nil, sandbox.ErrInvalid},
		{"twice", []api.VolumeMount{{Name: "a", Path: "/x"}, {Name: "a", Path: "/y"}}, "native", nil, sandbox.ErrInvalid},
		{"gvisor", m("v", "/data/v"), "gvisor", nil, sandbox.ErrInvalid},
	} {
		err := checkVolumeMounts(c.reqs, c.backend, pol, c.ceil, "t")
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}
