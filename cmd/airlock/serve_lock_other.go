//go:build !unix

package main

import "os"

// lockServeData: no flock here; the socket check is the only guard.
func lockServeData(data, kind string) (*os.File, error) { return nil, os.MkdirAll(data, 0o700) }
