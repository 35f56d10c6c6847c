// Package wasmtest holds test modules for the wasm backend, built without a
// toolchain. It must stay free of anything but module bytes.
package wasmtest

// HelloModule is the smallest useful WASI command: _start writes "hi\n" to
// stdout with one fd_write and returns. Encoded by hand (no toolchain is
// needed to build it), section by section.
func HelloModule() []byte {
	section := func(id byte, content ...byte) []byte {
		return append([]byte{id, byte(len(content))}, content...)
	}
	name := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	cat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	const i32 = 0x7f
	return cat(
		[]byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}, // magic, version 1
		// types: 0 = (i32 i32 i32 i32) -> i32 (fd_write), 1 = () -> ()
		section(1, 2, 0x60, 4, i32, i32, i32, i32, 1, i32, 0x60, 0, 0),
		// import wasi_snapshot_preview1.fd_write as function 0
		section(2, cat([]byte{1}, name("wasi_snapshot_preview1"), name("fd_write"), []byte{0x00, 0})...),
		section(3, 1, 1),    // function 1 has type 1
		section(5, 1, 0, 1), // one memory, min 1 page
		section(7, cat([]byte{2}, name("memory"), []byte{0x02, 0}, name("_start"), []byte{0x00, 1})...),
		// _start: fd_write(1, iovs=0, 1, nwritten=20); drop
		section(10, 1, 13, 0, 0x41, 1, 0x41, 0, 0x41, 1, 0x41, 20, 0x10, 0, 0x1a, 0x0b),
		// data at 0: iovec {buf=8, len=3}, then "hi\n" at 8
		section(11, 1, 0, 0x41, 0, 0x0b, 11, 8, 0, 0, 0, 3, 0, 0, 0, 'h', 'i', '\n'),
	)
}
