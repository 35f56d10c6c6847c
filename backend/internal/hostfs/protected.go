package hostfs

import (
	"github.com/airlock-dev/airlock/internal/writeback"
	"github.com/airlock-dev/airlock/policy"
)

// Dir returns a policy.GuardDir over the host directory p.
func Dir(p string) policy.GuardDir { return writeback.HostDir(p) }
