package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/url"

	"github.com/airlock-dev/airlock/api"
)

// ReadFile opens file path of sandbox id; the caller closes it.
func (c *Client) ReadFile(ctx context.Context, id, path string) (io.ReadCloser, error) {
	return c.stream(ctx, "GET", sbPath(id, "/files"), url.Values{"path": {path}}, nil, "")
}

// WriteFile writes r to path (creating parent directories) with mode.
func (c *Client) WriteFile(ctx context.Context, id, path string, r io.Reader, mode fs.FileMode) error {
	q := url.Values{"path": {path}, "mkdirs": {"true"}}
	if mode != 0 {
		q.Set("mode", fmt.Sprintf("%o", mode.Perm()))
	}
	return c.send(ctx, "PUT", sbPath(id, "/files"), q, r, "application/octet-stream")
}

// WriteFileMetadata is WriteFile that also gives the written file metadata
// (kept as extended attributes user.e2b.KEY; see api.FileInfo.Metadata).
func (c *Client) WriteFileMetadata(ctx context.Context, id, path string, r io.Reader, mode fs.FileMode, metadata map[string]string) error {
	q := url.Values{"path": {path}, "mkdirs": {"true"}}
	if mode != 0 {
		q.Set("mode", fmt.Sprintf("%o", mode.Perm()))
	}
	if len(metadata) > 0 {
		b, err := json.Marshal(metadata)
		if err != nil {
			return err
		}
		q.Set("metadata", string(b))
	}
	return c.send(ctx, "PUT", sbPath(id, "/files"), q, r, "application/octet-stream")
}

// Stat describes path.
func (c *Client) Stat(ctx context.Context, id, path string) (*api.FileInfo, error) {
	var fi api.FileInfo
	err := c.call(ctx, "GET", sbPath(id, "/files/stat"), url.Values{"path": {path}}, nil, &fi)
	return &fi, err
}

// ListDir lists directory path.
func (c *Client) ListDir(ctx context.Context, id, path string) ([]api.FileInfo, error) {
	var l api.FileList
	err := c.call(ctx, "GET", sbPath(id, "/files/list"), url.Values{"path": {path}}, nil, &l)
	return l.Files, err
}

// Remove removes path (a directory's contents too with recursive).
func (c *Client) Remove(ctx context.Context, id, path string, recursive bool) error {
	q := url.Values{"path": {path}}
	if recursive {
		q.Set("recursive", "true")
	}
	return c.call(ctx, "DELETE", sbPath(id, "/files"), q, nil, nil)
}

// Rename renames from to to.
func (c *Client) Rename(ctx context.Context, id, from, to string) error {
	return c.call(ctx, "POST", sbPath(id, "/files/rename"), nil, api.RenameRequest{From: from, To: to}, nil)
}

// Mkdir creates directory path (and its parents with parents).
func (c *Client) Mkdir(ctx context.Context, id, path string, mode fs.FileMode, parents bool) error {
	return c.call(ctx, "POST", sbPath(id, "/files/mkdir"), nil, api.MkdirRequest{Path: path, Mode: uint32(mode.Perm()), Parents: parents}, nil)
}

// Download returns the tree at path as a tar stream; the caller closes it.
func (c *Client) Download(ctx context.Context, id, path string) (io.ReadCloser, error) {
	return c.stream(ctx, "GET", sbPath(id, "/archive"), url.Values{"path": {path}}, nil, "")
}

// Upload extracts the tar stream r into directory path (created). Only
// regular files and directories are accepted; the whole archive is checked
// before anything is written.
func (c *Client) Upload(ctx context.Context, id, path string, r io.Reader) error {
	return c.send(ctx, "PUT", sbPath(id, "/archive"), url.Values{"path": {path}}, r, "application/x-tar")
}
