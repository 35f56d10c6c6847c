package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/airlock-dev/airlock/errdefs"
)

// Sandbox states beyond running and stopped.
const (
	// StatePaused: the sandbox's processes are gone, its files (workspace,
	// checkpoints) and record are kept; resume starts it again.
	StatePaused = "paused"
	// StateFrozen: the sandbox's processes are frozen in place, memory
	// kept, while the server lives (pause with "memory": true).
	StateFrozen = "frozen"
)

// PauseRequest is the optional body of POST /v1/sandboxes/{id}/pause.
type PauseRequest struct {
	// Memory freezes the processes in place (the cgroup freezer), keeping
	// their memory while the server lives, instead of ending them.
	Memory bool `json:"memory,omitempty"`
}

// KeepAliveWhileProcesses is the one condition keep_alive's object form
// takes: {"while": "processes"}.
const KeepAliveWhileProcesses = "processes"

// KeepAliveSpec is keep_alive's object form: the sandbox does not expire
// while a background process runs; once none runs it expires after Idle
// (default: the server's idle timeout) and not before its timeout.
type KeepAliveSpec struct {
	While string   `json:"while"`
	Idle  Duration `json:"idle,omitempty"`
}

// UnmarshalJSON accepts keep_alive as a boolean (the old form) or as
// {"while": "processes", "idle": "30s"}; unknown fields are errors.
func (r *CreateSandboxRequest) UnmarshalJSON(b []byte) error {
	type plain CreateSandboxRequest
	var aux struct {
		plain
		KeepAlive json.RawMessage `json:"keep_alive,omitempty"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&aux); err != nil {
		return err
	}
	*r = CreateSandboxRequest(aux.plain)
	switch r.OnTimeout {
	case "", OnTimeoutDestroy, OnTimeoutPause:
	default:
		return fmt.Errorf("on_timeout %q: want %q or %q: %w", r.OnTimeout, OnTimeoutDestroy, OnTimeoutPause, errdefs.ErrInvalid)
	}
	raw := bytes.TrimSpace(aux.KeepAlive)
	switch {
	case len(raw) == 0 || string(raw) == "null" || string(raw) == "false":
	case string(raw) == "true":
		r.KeepAlive = true
	case raw[0] == '{':
		var ks KeepAliveSpec
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(&ks); err != nil {
			return fmt.Errorf("keep_alive: %v: %w", err, errdefs.ErrInvalid)
		}
		if ks.While != KeepAliveWhileProcesses {
			return fmt.Errorf("keep_alive.while %q: want %q: %w", ks.While, KeepAliveWhileProcesses, errdefs.ErrInvalid)
		}
		if ks.Idle < 0 || ks.Idle.D() > 24*time.Hour {
			return fmt.Errorf("keep_alive.idle %s: want 0 to 24h: %w", ks.Idle.D(), errdefs.ErrInvalid)
		}
		r.KeepAliveWhile = &ks
	default:
		return fmt.Errorf("keep_alive %s: want true, false or {\"while\": \"processes\"}: %w", raw, errdefs.ErrInvalid)
	}
	return nil
}

// MarshalJSON writes keep_alive in its object form when KeepAliveWhile is
// set, else as a boolean.
func (r CreateSandboxRequest) MarshalJSON() ([]byte, error) {
	type plain CreateSandboxRequest
	aux := struct {
		plain
		KeepAlive any `json:"keep_alive,omitempty"`
	}{plain: plain(r)}
	switch {
	case r.KeepAliveWhile != nil:
		aux.KeepAlive = r.KeepAliveWhile
	case r.KeepAlive:
		aux.KeepAlive = true
	}
	return json.Marshal(aux)
}

// CheckpointRequest is the body of POST /v1/sandboxes/{id}/checkpoints
// (optional).
type CheckpointRequest struct {
	Name string `json:"name,omitempty"`
}

// Checkpoint is a recorded state of a sandbox's workspace: a manifest of
// every file's sha256 and mode, with the files' contents stored once per
// distinct content.
type Checkpoint struct {
	ID        string    `json:"id"`
	Sandbox   string    `json:"sandbox"`
	Name      string    `json:"name,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Files     int       `json:"files"`
	// Bytes is the workspace's size (what the checkpoint counts against
	// the tenant's checkpoint quota); NewBytes what it stored that no
	// earlier checkpoint of the sandbox had.
	Bytes    int64 `json:"bytes"`
	NewBytes int64 `json:"new_bytes"`
	// Skipped counts entries not recorded (sockets, fifos, devices).
	Skipped int `json:"skipped,omitempty"`
	// Manifest is the sha256 of the checkpoint's manifest, kept in the
	// server's store: a changed manifest is refused.
	Manifest string `json:"manifest_sha256"`
}

// CheckpointList is the answer of GET /v1/sandboxes/{id}/checkpoints.
type CheckpointList struct {
	Checkpoints []Checkpoint `json:"checkpoints"`
}

// RollbackRequest is the body of POST /v1/sandboxes/{id}/rollback.
type RollbackRequest struct {
	Checkpoint string `json:"checkpoint"`
}
