package native

import (
	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/sandbox"
)

func init() {
	backend.Register(backend.Factory{Name: "native", Rank: 0, HostIDs: true, Open: func(e backend.Env) (sandbox.Backend, error) {
		return New(Config{AgentBinary: e.AgentBinary, Log: e.Log, StateDir: e.StateDir, CgroupParent: e.CgroupParent, HostIDs: e.IDs}), nil
	}})
}
