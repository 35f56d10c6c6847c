package docker

import (
	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/sandbox"
)

func init() {
	backend.Register(backend.Factory{Name: "docker", Rank: 2, HostIDs: true, Open: func(e backend.Env) (sandbox.Backend, error) {
		// Owner plays the cgroup parent's part: Cleanup removes only the
		// containers labelled with it.
		cfg := Config{AgentBinary: e.AgentBinary, Log: e.Log, StateDir: e.StateDir, Owner: e.CgroupParent, HostIDs: e.IDs}
		if e.Images != nil { // never a typed nil in the interface
			cfg.Images = e.Images
		}
		return New(cfg), nil
	}})
}
