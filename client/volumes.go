package client

import (
	"context"
	"net/url"

	"github.com/airlock-dev/airlock/api"
)

// CreateVolume makes a named volume of size bytes (its quota) for the
// caller's tenant. Mount it with CreateSandboxRequest.Volumes.
func (c *Client) CreateVolume(ctx context.Context, name string, size int64) (*api.Volume, error) {
	var v api.Volume
	if err := c.call(ctx, "POST", "/v1/volumes", nil, api.CreateVolumeRequest{Name: name, SizeBytes: size}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Volumes lists the caller's volumes.
func (c *Client) Volumes(ctx context.Context) ([]api.Volume, error) {
	var l api.VolumeList
	if err := c.call(ctx, "GET", "/v1/volumes", nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Volumes, nil
}

// Volume describes one volume (with the live sandboxes mounting it).
func (c *Client) Volume(ctx context.Context, name string) (*api.Volume, error) {
	var v api.Volume
	if err := c.call(ctx, "GET", "/v1/volumes/"+url.PathEscape(name), nil, nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// DeleteVolume deletes a volume and its files; ErrExists (409) while a
// sandbox mounts it.
func (c *Client) DeleteVolume(ctx context.Context, name string) error {
	return c.call(ctx, "DELETE", "/v1/volumes/"+url.PathEscape(name), nil, nil, nil)
}
