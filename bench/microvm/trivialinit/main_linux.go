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
