package main

import "github.com/airlock-dev/airlock/backend/microvm"

// The microvm backend's VMM jail: started by the backend in new
// namespaces, it confines the VMM (QEMU) and execs it. Hidden: never run
// it by hand.
func init() {
	register(command{
		name:   microvm.JailCommand,
		short:  "microVM VMM jail (internal)",
		hidden: true,
		run:    microvm.JailMain,
	})
}
