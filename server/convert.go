package server

import (
	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/sandbox"
)

// The wire structs are api's own: the server converts the core's values
// here, field by field, so a change to a core struct never changes the
// API by accident.

func apiExit(e sandbox.ExitStatus) api.ExitStatus {
	return api.ExitStatus{Code: e.Code, Signal: e.Signal, TimedOut: e.TimedOut, OOM: e.OOM, Truncated: e.Truncated}
}

func apiExitPtr(e sandbox.ExitStatus) *api.ExitStatus {
	a := apiExit(e)
	return &a
}

func apiFileInfo(f sandbox.FileInfo) api.FileInfo {
	out := api.FileInfo{Name: f.Name, Path: f.Path, Size: f.Size, Mode: f.Mode, ModTime: f.ModTime, IsDir: f.IsDir, Link: f.Link}
	if o := f.Owner; o != nil {
		uid, gid := o.UID, o.GID
		out.UID, out.GID, out.Owner, out.Group = &uid, &gid, o.User, o.Group
	}
	out.Metadata = f.Metadata
	return out
}

func apiStats(s sandbox.Stats) *api.Stats {
	return &api.Stats{MemoryPeakBytes: s.MemoryPeakBytes, MemoryBytes: s.MemoryBytes, Pids: s.Pids, CPUNanos: s.CPUNanos, Violations: s.Violations}
}

func apiProbe(p sandbox.Probe) api.Probe {
	return api.Probe{Available: p.Available, Reason: p.Reason, Isolation: p.Isolation, Details: p.Details}
}
