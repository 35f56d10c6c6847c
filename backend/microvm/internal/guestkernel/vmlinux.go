package guestkernel

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os/exec"
)

// Offsets in the x86 boot protocol's setup header (Documentation/arch/x86/boot.rst).
const (
	offSetupSects    = 0x1f1
	offBootMagic     = 0x202 // "HdrS"
	offVersion       = 0x206
	offPayloadOffset = 0x248
	offPayloadLength = 0x24c
	minProtoPayload  = 0x208 // boot protocol 2.08 added the payload fields
)

// Payload returns the compressed kernel inside a bzImage and the name of
// its compression ("xz", "gzip", "zstd", "lz4", "lzma", "bzip2").
func Payload(bz []byte) ([]byte, string, error) {
	if len(bz) < offPayloadLength+4 {
		return nil, "", errors.New("bzImage: too short for a setup header")
	}
	if string(bz[offBootMagic:offBootMagic+4]) != "HdrS" {
		return nil, "", errors.New("bzImage: no HdrS magic (not an x86 bzImage)")
	}
	if v := binary.LittleEndian.Uint16(bz[offVersion:]); v < minProtoPayload {
		return nil, "", fmt.Errorf("bzImage: boot protocol %#x has no payload fields (want >= 2.08)", v)
	}
	setup := int(bz[offSetupSects])
	if setup == 0 {
		setup = 4
	}
	start := (setup + 1) * 512
	off := int64(binary.LittleEndian.Uint32(bz[offPayloadOffset:]))
	n := int64(binary.LittleEndian.Uint32(bz[offPayloadLength:]))
	begin := int64(start) + off
	if begin < 0 || n <= 0 || begin+n > int64(len(bz)) {
		return nil, "", fmt.Errorf("bzImage: payload [%d, +%d) outside the %d-byte file", begin, n, len(bz))
	}
	p := bz[begin : begin+n]
	for _, m := range []struct {
		magic []byte
		name  string
	}{
		{[]byte{0xfd, '7', 'z', 'X', 'Z', 0}, "xz"},
		{[]byte{0x1f, 0x8b}, "gzip"},
		{[]byte{0x28, 0xb5, 0x2f, 0xfd}, "zstd"},
		{[]byte{0x02, 0x21, 0x4c, 0x18}, "lz4"},
		{[]byte{0x5d, 0x00, 0x00}, "lzma"},
		{[]byte("BZh"), "bzip2"},
	} {
		if bytes.HasPrefix(p, m.magic) {
			return p, m.name, nil
		}
	}
	return nil, "", fmt.Errorf("bzImage: payload of unknown compression (starts % x)", p[:min(len(p), 6)])
}

// decompressors are the Debian tools that undo each compression (xz-utils,
// gzip, zstd, lz4, bzip2). Go's standard library has only gzip; the tools
// are what Debian's own extract-vmlinux uses too.
var decompressors = map[string][]string{
	"xz":    {"xz", "-dc", "--single-stream"},
	"lzma":  {"xz", "-dc", "--format=lzma"},
	"gzip":  {"gzip", "-dc"},
	"zstd":  {"zstd", "-dcq"},
	"lz4":   {"lz4", "-dc"},
	"bzip2": {"bzip2", "-dc"},
}

// Vmlinux extracts the uncompressed ELF kernel from a bzImage and checks it
// is an x86-64 ELF executable with a PVH entry note (the way QEMU boots an
// ELF kernel on -M microvm).
func Vmlinux(bz []byte) ([]byte, error) {
	p, comp, err := Payload(bz)
	if err != nil {
		return nil, err
	}
	tool := decompressors[comp]
	cmd := exec.Command(tool[0], tool[1:]...)
	cmd.Stdin = bytes.NewReader(p)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil && out.Len() == 0 {
		return nil, fmt.Errorf("decompress %s payload with %s: %v: %s", comp, tool[0], err, errb.String())
	}
	img := out.Bytes()
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		return nil, fmt.Errorf("payload is not ELF: %w", err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 || f.Type != elf.ET_EXEC {
		return nil, fmt.Errorf("payload is %v %v, want an x86-64 executable", f.Machine, f.Type)
	}
	if !hasPVHNote(f) {
		return nil, errors.New("vmlinux has no PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY): QEMU cannot boot it as ELF")
	}
	return img, nil
}

// hasPVHNote looks for the Xen ELF note type 18 (PHYS32_ENTRY).
func hasPVHNote(f *elf.File) bool {
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(p.Open(), 1<<20))
		if err != nil {
			continue
		}
		for len(b) >= 12 {
			nsz := int(binary.LittleEndian.Uint32(b[0:]))
			dsz := int(binary.LittleEndian.Uint32(b[4:]))
			typ := binary.LittleEndian.Uint32(b[8:])
			al := func(n int) int { return (n + 3) &^ 3 }
			if nsz < 0 || dsz < 0 || 12+al(nsz)+al(dsz) > len(b) {
				break
			}
			name := string(bytes.TrimRight(b[12:12+nsz], "\x00"))
			if name == "Xen" && typ == 18 {
				return true
			}
			b = b[12+al(nsz)+al(dsz):]
		}
	}
	return false
}
