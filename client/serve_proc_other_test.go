//go:build !linux

package client_test

import "errors"

// A real airlock serve with the native backend needs Linux: requireNative
// skips before any of these runs.

func (s *serveProc) start() error {
	return errors.New("airlock serve with the native backend needs Linux")
}
func (s *serveProc) stop()  {}
func (s *serveProc) kill9() {}
