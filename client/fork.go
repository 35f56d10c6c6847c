package client

import (
	"context"
	"net/url"

	"github.com/airlock-dev/airlock/api"
)

// Fork makes req.Count (default 1) new sandboxes of sandbox id's files and
// settings, all or none: its workspace and (an image sandbox's) writable
// layer copied while its processes are frozen, by reflink where the
// server's filesystem has them. Memory is not kept. Sandboxes that cannot
// be paused are refused (errdefs.ErrNotSupported, naming the backend).
func (c *Client) Fork(ctx context.Context, id string, req api.ForkRequest) (*api.ForkResult, error) {
	var res api.ForkResult
	err := c.call(ctx, "POST", sbPath(id, "/fork"), nil, req, &res)
	return &res, err
}

// Snapshot keeps sandbox id's files and settings as a snapshot of its
// tenant (name may be empty; a name is unique among the tenant's).
func (c *Client) Snapshot(ctx context.Context, id, name string) (*api.Snapshot, error) {
	var s api.Snapshot
	err := c.call(ctx, "POST", sbPath(id, "/snapshots"), nil, api.SnapshotRequest{Name: name}, &s)
	return &s, err
}

// Snapshots lists the tenant's snapshots, oldest first; those of sandbox
// id only when id is set.
func (c *Client) Snapshots(ctx context.Context, id string) ([]api.Snapshot, error) {
	var l api.SnapshotList
	q := url.Values{}
	if id != "" {
		q.Set("sandbox", id)
	}
	err := c.call(ctx, "GET", "/v1/snapshots", q, nil, &l)
	return l.Snapshots, err
}

// GetSnapshot returns snapshot ref (its ID or name).
func (c *Client) GetSnapshot(ctx context.Context, ref string) (*api.Snapshot, error) {
	var s api.Snapshot
	err := c.call(ctx, "GET", "/v1/snapshots/"+url.PathEscape(ref), nil, nil, &s)
	return &s, err
}

// DeleteSnapshot deletes snapshot ref (its ID or name) and its files.
func (c *Client) DeleteSnapshot(ctx context.Context, ref string) error {
	return c.call(ctx, "DELETE", "/v1/snapshots/"+url.PathEscape(ref), nil, nil, nil)
}

// CreateFromSnapshot makes req.Count (default 1) new sandboxes of
// snapshot ref's files and settings, all or none.
func (c *Client) CreateFromSnapshot(ctx context.Context, ref string, req api.ForkRequest) (*api.ForkResult, error) {
	var res api.ForkResult
	err := c.call(ctx, "POST", "/v1/snapshots/"+url.PathEscape(ref)+"/sandboxes", nil, req, &res)
	return &res, err
}
