// Command trivialinit is the benchmark peer's init: the least a Linux
// guest can do once booted (write one line to the serial console, power
// off), so that booting it measures the kernel and QEMU alone.
package main
