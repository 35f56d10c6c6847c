// Package serve is the red-team suite's part against `airlock serve`: a real
// server (root, native backend, TCP with API keys) attacked by one tenant
// while another works beside it (TestServeAttacks, the serve scorecard), and
// the server under many tenants' load leaving nothing behind (TestServeLoad).
// It is a package of its own so that `make test` runs it beside TestEscape
// (go test runs packages, not tests, two at a time): every attack is still
// first shown to work without the protection.
package serve
