package client

import (
	"context"
	"io"
)

// RawForTest sends a raw request and returns the error answer, if any.
func RawForTest(c *Client, method, path, ctype string, body io.Reader) error {
	req, err := c.request(context.Background(), method, path, nil, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", ctype)
	resp, err := c.do(req, 0)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// KeyForTest is c's API key.
func KeyForTest(c *Client) string { return c.key }
