// Command helper is the program the sandboxtest conformance suite runs
// inside a sandbox. It is built by the suite for the backend's target
// (GOOS=linux, or GOOS=wasip1 for the wasm backend) and copied into the
// sandbox, so every backend runs the same code. Each subcommand does one
// observable thing; it must stay small, deterministic and free of anything
// the target cannot run (Linux-only subcommands live in helper_linux.go).
package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

var commands = map[string]func(args []string) int{
	"echo-split": func(a []string) int { // echo-split OUT ERR
		fmt.Fprint(os.Stdout, a[0])
		fmt.Fprint(os.Stderr, a[1])
		return 0
	},
	"exit": func(a []string) int { return atoi(a[0]) },
	"cat": func([]string) int {
		if _, err := io.Copy(os.Stdout, os.Stdin); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	},
	"bytes": func(a []string) int { // bytes N: N times every byte value 0..255
		buf := make([]byte, 256)
		for i := range buf {
			buf[i] = byte(i)
		}
		for n := atoi(a[0]); n > 0; n-- {
			if _, err := os.Stdout.Write(buf); err != nil {
				return 1
			}
		}
		return 0
	},
	"pattern": func(a []string) int { // pattern MIB: byte i is i%251
		buf := make([]byte, 251*4096)
		for i := range buf {
			buf[i] = byte(i % 251)
		}
		left := int64(atoi(a[0])) << 20
		for left > 0 {
			n := int64(len(buf))
			if n > left {
				n = left
			}
			if _, err := os.Stdout.Write(buf[:n]); err != nil {
				return 1
			}
			left -= n
		}
		return 0
	},
	"sleep": func(a []string) int {
		time.Sleep(time.Duration(atoi(a[0])) * time.Second)
		return 0
	},
	"env": func(a []string) int { fmt.Print(os.Getenv(a[0])); return 0 },
	"pwd": func([]string) int {
		d, err := os.Getwd()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Print(d)
		return 0
	},
	"alloc": func(a []string) int { // alloc MIB: allocate and touch
		var keep [][]byte
		for i := 0; i < atoi(a[0]); i++ {
			b := make([]byte, 1<<20)
			for j := 0; j < len(b); j += 4096 {
				b[j] = 1
			}
			keep = append(keep, b)
		}
		fmt.Printf("allocated %d MiB\n", len(keep))
		return 0
	},
	"readfile": func(a []string) int {
		b, err := os.ReadFile(a[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		os.Stdout.Write(b)
		return 0
	},
	"writefile": func(a []string) int {
		if err := os.WriteFile(a[0], []byte(a[1]), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	},
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	return n
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: helper COMMAND [ARGS]")
		os.Exit(2)
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "helper: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
	os.Exit(cmd(os.Args[2:]))
}
