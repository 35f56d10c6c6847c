package client

import (
	"context"

	"github.com/airlock-dev/airlock/api"
)

// AccessToken returns sandbox id's access token of scope
// (api.TokenScopeSandbox or api.TokenScopePorts): a credential for that
// sandbox only, the same on every call, valid while the sandbox exists.
func (c *Client) AccessToken(ctx context.Context, id, scope string) (string, error) {
	var t api.AccessToken
	if err := c.call(ctx, "POST", sbPath(id, "/access-tokens"), nil, api.AccessTokenRequest{Scope: scope}, &t); err != nil {
		return "", err
	}
	return t.Token, nil
}
