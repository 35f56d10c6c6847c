package client

import (
	"context"
	"io"
	"net/url"

	"github.com/airlock-dev/airlock/api"
)

// The server's image store. Every caller may list and inspect images and
// create sandboxes from them (CreateSandboxRequest.Image); pulling,
// importing, removing and pruning are the operator's (the local socket).

func imagePath(ref string) string { return "/v1/images/" + url.PathEscape(ref) }

// Images lists the server's images.
func (c *Client) Images(ctx context.Context) ([]api.Image, error) {
	var out api.ImageList
	if err := c.call(ctx, "GET", "/v1/images", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Images, nil
}

// Image inspects one image: a name ("debian:bookworm"), NAME@sha256:...,
// or an ID or its prefix.
func (c *Client) Image(ctx context.Context, ref string) (*api.Image, error) {
	var out api.Image
	if err := c.call(ctx, "GET", imagePath(ref), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PullImage has the server pull ref from its registry (with the server's
// Docker config credentials). It returns when the image is in the store.
func (c *Client) PullImage(ctx context.Context, req api.PullImageRequest) (*api.Image, error) {
	var out api.Image
	if err := c.call(ctx, "POST", "/v1/images/pull", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ImportImage sends a `docker save` tarball (plain or gzip) to the
// server's store; tag ("" for the archive's own names) names its image.
func (c *Client) ImportImage(ctx context.Context, tarball io.Reader, tag string) ([]api.Image, error) {
	q := url.Values{}
	if tag != "" {
		q.Set("tag", tag)
	}
	req, err := c.request(ctx, "POST", "/v1/images/import", q, tarball)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-tar")
	resp, err := c.do(req, 0)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out api.ImageList
	if err := decodeJSONBody(resp.Body, &out); err != nil {
		return nil, err
	}
	return out.Images, nil
}

// RemoveImage takes the name ref off its image (see the API).
func (c *Client) RemoveImage(ctx context.Context, ref string) (*api.Image, error) {
	var out api.Image
	if err := c.call(ctx, "DELETE", imagePath(ref), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PruneImages removes unnamed images (all: every image no sandbox uses)
// and their layers.
func (c *Client) PruneImages(ctx context.Context, all bool) (*api.PruneImagesResult, error) {
	var out api.PruneImagesResult
	if err := c.call(ctx, "POST", "/v1/images/prune", nil, api.PruneImagesRequest{All: all}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
