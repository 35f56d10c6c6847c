package api

// Scopes of sandbox access tokens.
const (
	// TokenScopeSandbox: the sandbox's in-sandbox API (exec, processes,
	// PTY, files, watch, code, ports), not its lifecycle.
	TokenScopeSandbox = "sandbox"
	// TokenScopePorts: the sandbox's ports only (the port proxy, raw TCP).
	TokenScopePorts = "ports"
)

// AccessTokenRequest is the body of POST /v1/sandboxes/{id}/access-tokens.
type AccessTokenRequest struct {
	Scope string `json:"scope"`
}

// AccessToken is a credential for one sandbox: sent as a Bearer token it
// acts as the sandbox's tenant on that sandbox's routes of its scope only.
// It is the same for every request of the same sandbox and scope, and
// valid while the sandbox exists.
type AccessToken struct {
	Sandbox string `json:"sandbox"`
	Scope   string `json:"scope"`
	Token   string `json:"token"`
}
