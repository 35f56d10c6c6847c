// Package envdpbconnect holds the connect-go handlers and clients
// generated (protoc-gen-connect-go) from Airlock's description of E2B's
// envd services (../process.proto, ../filesystem.proto). Only this file is
// written by hand; regenerate the rest with `go generate ./e2b/envdpb`.
package envdpbconnect
