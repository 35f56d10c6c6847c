// Package envdpb holds the Go code generated (protoc-gen-go,
// protoc-gen-connect-go) from Airlock's own description of E2B's envd
// services (process.proto, filesystem.proto: names and field numbers are
// the wire facts, the files are ours). Edit the .proto files and run
// `go generate ./e2b/envdpb` (needs protoc, protoc-gen-go and
// protoc-gen-connect-go on PATH); never edit the generated files.
package envdpb

//go:generate protoc -I . --go_out=. --go_opt=paths=source_relative --connect-go_out=. --connect-go_opt=paths=source_relative process.proto filesystem.proto
