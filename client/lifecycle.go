package client

import (
	"context"
	"net/url"

	"github.com/airlock-dev/airlock/api"
)

// Pause ends sandbox id's processes and keeps its files and record
// (state paused); it survives a server restart. Pausing a paused
// sandbox is a no-op.
func (c *Client) Pause(ctx context.Context, id string) (*api.Sandbox, error) {
	var sb api.Sandbox
	err := c.call(ctx, "POST", sbPath(id, "/pause"), nil, nil, &sb)
	return &sb, err
}

// Resume starts paused sandbox id again on its files (same ID). Files
// changed while paused are refused (errdefs.ErrInvalid, code corrupt).
func (c *Client) Resume(ctx context.Context, id string) (*api.Sandbox, error) {
	var sb api.Sandbox
	err := c.call(ctx, "POST", sbPath(id, "/resume"), nil, nil, &sb)
	return &sb, err
}

// Checkpoint records sandbox id's workspace (name may be empty).
func (c *Client) Checkpoint(ctx context.Context, id, name string) (*api.Checkpoint, error) {
	var cp api.Checkpoint
	err := c.call(ctx, "POST", sbPath(id, "/checkpoints"), nil, api.CheckpointRequest{Name: name}, &cp)
	return &cp, err
}

// Checkpoints lists sandbox id's checkpoints, oldest first.
func (c *Client) Checkpoints(ctx context.Context, id string) ([]api.Checkpoint, error) {
	var l api.CheckpointList
	err := c.call(ctx, "GET", sbPath(id, "/checkpoints"), nil, nil, &l)
	return l.Checkpoints, err
}

// DeleteCheckpoint deletes checkpoint cp of sandbox id.
func (c *Client) DeleteCheckpoint(ctx context.Context, id, cp string) error {
	return c.call(ctx, "DELETE", sbPath(id, "/checkpoints/"+url.PathEscape(cp)), nil, nil, nil)
}

// Rollback restores sandbox id's workspace to checkpoint cp in place
// (same ID; its processes are restarted). A checkpoint whose content
// changed is refused (code corrupt, naming the file) and the sandbox is
// left as it was.
func (c *Client) Rollback(ctx context.Context, id, cp string) (*api.Sandbox, error) {
	var sb api.Sandbox
	err := c.call(ctx, "POST", sbPath(id, "/rollback"), nil, api.RollbackRequest{Checkpoint: cp}, &sb)
	return &sb, err
}

// Freeze freezes sandbox id's processes in place, memory kept, while the
// server lives (the cgroup freezer); Resume thaws it. Requests to a frozen
// sandbox are refused (409 conflict) unless it was created with
// auto_resume, which thaws it.
func (c *Client) Freeze(ctx context.Context, id string) (*api.Sandbox, error) {
	var sb api.Sandbox
	err := c.call(ctx, "POST", sbPath(id, "/pause"), nil, api.PauseRequest{Memory: true}, &sb)
	return &sb, err
}
