// Package sdk holds no Go code: sdk/python and sdk/typescript are the
// Python and TypeScript SDKs of the /v1 API. Its test checks both against
// api/openapi.yaml (every operation called or explicitly left out, every
// request and answer schema mirrored field by field), so an API change
// that forgets an SDK fails CI. It must never import the server.
package sdk
