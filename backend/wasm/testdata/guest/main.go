// Command guest is the WASI test program of the wasm backend's tests,
// built by them with GOOS=wasip1 GOARCH=wasm. Its first argument picks
// what it does; attacks print what they reached and exit 0 only when the
// attack worked.
package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"
)

//go:wasmimport wasi_snapshot_preview1 path_open
func pathOpen(fd int32, dirflags int32, path unsafe.Pointer, pathLen int32, oflags int32, rightsBase int64, rightsInheriting int64, fdflags int32, newFD unsafe.Pointer) int32

//go:wasmimport wasi_snapshot_preview1 fd_read
func fdRead(fd int32, iovs unsafe.Pointer, iovsLen int32, nread unsafe.Pointer) int32

var sink [][]byte

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: guest MODE [ARGS]")
		os.Exit(64)
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "hello":
		fmt.Printf("hello %s\n", strings.Join(args, " "))
	case "env":
		for _, kv := range os.Environ() {
			fmt.Println(kv)
		}
	case "pwd":
		wd, err := os.Getwd()
		fmt.Println(wd, err)
	case "cat":
		b, err := os.ReadFile(args[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		os.Stdout.Write(b)
	case "write":
		if err := os.WriteFile(args[0], []byte(args[1]), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
	case "ls":
		entries, err := os.ReadDir(args[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		for _, e := range entries {
			fmt.Println(e.Name())
		}
	case "openmany":
		// Hold N opens of a file; print how many succeeded.
		n, _ := strconv.Atoi(args[1])
		var held []*os.File
		for i := 0; i < n; i++ {
			f, err := os.Open(args[0])
			if err != nil {
				fmt.Printf("opened %d\n", len(held))
				fmt.Fprintln(os.Stderr, err)
				os.Exit(3)
			}
			held = append(held, f)
		}
		fmt.Printf("opened %d\n", len(held))
	case "stdin":
		io.Copy(os.Stdout, os.Stdin)
	case "exit":
		n, _ := strconv.Atoi(args[0])
		os.Exit(n)
	case "loop":
		for i := 0; ; i++ {
			if i < 0 {
				fmt.Println(i)
			}
		}
	case "sleep":
		time.Sleep(time.Hour)
	case "grow":
		// Keep 1 MiB blocks alive until the runtime cannot grow memory.
		for i := 0; ; i++ {
			b := make([]byte, 1<<20)
			b[0] = byte(i)
			sink = append(sink, b)
			if i%64 == 0 {
				fmt.Fprintf(os.Stderr, "%d MiB\n", i)
			}
		}
	case "hold":
		// Allocate N MiB, say so, then wait to be stopped.
		n, _ := strconv.Atoi(args[0])
		for i := 0; i < n; i++ {
			b := make([]byte, 1<<20)
			b[0] = 1
			sink = append(sink, b)
		}
		fmt.Println("held")
		time.Sleep(time.Hour)
	case "flood":
		n, _ := strconv.Atoi(args[0])
		line := []byte(strings.Repeat("x", 1023) + "\n")
		for i := 0; i < n; i += len(line) {
			os.Stdout.Write(line)
		}
	case "trap":
		// A load far past the end of linear memory: a wasm trap.
		p := (*byte)(unsafe.Pointer(uintptr(0xfffffff0)))
		fmt.Println(*p)
	case "rawopen":
		// path_open relative to every preopen fd with the path as given
		// (".." and all), bypassing the lexical cleaning Go's os does.
		for fd := int32(3); fd < 16; fd++ {
			if data, ok := rawRead(fd, args[0]); ok {
				fmt.Printf("fd %d: %s", fd, data)
				return
			}
		}
		fmt.Fprintln(os.Stderr, "rawopen: refused on every preopen")
		os.Exit(3)
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(64)
	}
}

// rawRead opens path under dirfd with path_open (following symlinks) and
// reads up to 4 KiB.
func rawRead(dirfd int32, path string) (string, bool) {
	p := []byte(path)
	var fd int32
	const rightsRead = 1 << 1
	if errno := pathOpen(dirfd, 1, unsafe.Pointer(&p[0]), int32(len(p)), 0, rightsRead, 0, 0, unsafe.Pointer(&fd)); errno != 0 {
		return "", false
	}
	buf := make([]byte, 4096)
	iov := [2]uint32{uint32(uintptr(unsafe.Pointer(&buf[0]))), uint32(len(buf))}
	var n uint32
	if errno := fdRead(fd, unsafe.Pointer(&iov), 1, unsafe.Pointer(&n)); errno != 0 {
		return "", false
	}
	return string(buf[:n]), true
}
