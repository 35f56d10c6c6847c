// Command trivialinit is the benchmark peer's init: the least a Linux
// guest can do once booted (write one line to the serial console, power
// off), so that booting it measures the kernel and QEMU alone.
package main

import (
	"os"
	"syscall"
)

func main() {
	syscall.Mknod("/console", syscall.S_IFCHR|0o600, 5<<8|1)
	if f, err := os.OpenFile("/console", os.O_WRONLY, 0); err == nil {
		f.Write([]byte("AIRLOCK-BENCH-READY\n"))
	}
	syscall.Reboot(syscall.LINUX_REBOOT_CMD_POWER_OFF)
}
