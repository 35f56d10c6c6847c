// Package e2b serves E2B's wire protocols (its control API, the in-sandbox
// "envd" API and the port proxy) over Airlock's one sandbox model, so that
// programs written for E2B's SDKs run unchanged against `airlock serve
// --e2b-listen`. It is an adapter at the edge: every call it makes goes
// through the /v1 API with the Go SDK, authenticated as the caller (an
// API key, or a sandbox-scoped access token the /v1 API minted), so keys,
// tenants, ceilings, quotas and audit are /v1's own.
//
// It must never hold state that /v1 cannot give back (what E2B keeps per
// sandbox is stored in /v1 labels under the reserved prefix "e2b."), never
// reach a sandbox but through /v1, and never trust what a sandbox says.
package e2b
