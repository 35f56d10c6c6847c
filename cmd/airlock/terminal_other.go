//go:build !unix

package main

import "os"

// notifyResize: this OS sends no window-change signal; the size is the one
// at the start.
func notifyResize() chan os.Signal { return nil }

func stopResize(chan os.Signal) {}
