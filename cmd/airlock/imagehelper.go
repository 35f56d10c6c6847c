package main

import "github.com/airlock-dev/airlock/internal/imageroot"

// The image overlay helper: started by a backend inside a user namespace
// of a sandbox's host id range to make its image root there
// (imageroot.MappedOverlay). Hidden: never run it by hand.
func init() {
	register(command{
		name:   imageroot.HelperCommand,
		short:  "image root helper (internal)",
		hidden: true,
		run:    func([]string) int { return imageroot.HelperMain() },
	})
}
