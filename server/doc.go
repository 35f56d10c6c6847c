// Package server is `airlock serve`: the /v1 HTTP API over a unix socket (and
// optionally TCP) that creates sandboxes on request and lets callers exec,
// move files and read audit events in them, with API keys bound to tenants,
// per-tenant quotas, expiry, warm pools, Prometheus metrics and an embedded
// SQLite store that survives restarts.
//
// It must never let one tenant see or touch another tenant's sandbox, never
// hand a pooled sandbox out twice, never leave host resources behind a
// sandbox it forgot, and never translate error kinds to HTTP statuses
// anywhere but errors.go.
package server
