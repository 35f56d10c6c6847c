//go:build !linux

package sessclient

// Sessions need Linux (a warm native sandbox); elsewhere only the key's
// parsing is here and main's `run --session` says so.
