package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/airlock-dev/airlock/api"
)

// FileWatch is a running watch of files in a sandbox (WatchFiles).
type FileWatch struct {
	body io.ReadCloser
	dec  *json.Decoder
}

// WatchFiles watches path in sandbox id (recursive: its whole tree) and
// returns once the sandbox watches it, so a change made after it returns
// is seen. Events come from Next until ctx ends, Close, the path goes
// away or the sandbox ends (then Next returns io.EOF).
func (c *Client) WatchFiles(ctx context.Context, id, path string, recursive bool) (*FileWatch, error) {
	q := url.Values{"path": {path}}
	if recursive {
		q.Set("recursive", "true")
	}
	req, err := c.request(ctx, "GET", sbPath(id, "/files/watch"), q, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return nil, err
	}
	return &FileWatch{body: resp.Body, dec: json.NewDecoder(resp.Body)}, nil
}

// Next returns the next change; io.EOF once the watch ended.
func (w *FileWatch) Next() (api.FileEvent, error) {
	var e api.FileEvent
	if err := w.dec.Decode(&e); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return e, io.EOF
		}
		return e, fmt.Errorf("airlock: watch files: %w", err)
	}
	return e, nil
}

// Close ends the watch.
func (w *FileWatch) Close() error { return w.body.Close() }
