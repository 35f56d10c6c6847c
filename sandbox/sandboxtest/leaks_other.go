//go:build !linux

package sandboxtest

import "errors"

// HostLeaks is only implemented on Linux.
func HostLeaks(id string, dirs ...string) error {
	return errors.New("sandboxtest: host leak check needs Linux")
}
