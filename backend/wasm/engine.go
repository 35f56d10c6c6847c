package wasm

import "runtime"

// compilerSupported mirrors where wazero compiles to machine code (it falls
// back to its interpreter elsewhere); used only to report it in Probe.
func compilerSupported() bool {
	switch runtime.GOARCH {
	case "amd64", "arm64":
		switch runtime.GOOS {
		case "linux", "darwin", "windows", "freebsd", "netbsd", "dragonfly", "solaris", "illumos":
			return true
		}
	}
	return false
}
