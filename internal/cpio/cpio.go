// Package cpio writes "newc" cpio archives, the format the Linux kernel
// unpacks as its initramfs (the microvm backend's guest init, and the
// trivial init its benchmark boots). Only what an initramfs needs:
// directories and regular files owned by root, no links or devices.
package cpio

import (
	"bufio"
	"fmt"
	"io"
	"os"
)

// Writer writes a "newc" cpio archive, the format the kernel unpacks
// as its initramfs. Only what an initramfs needs: directories and regular
// files, owned by root.
type Writer struct {
	w   *bufio.Writer
	ino uint32
	n   int64
}

// NewWriter returns a Writer on w; Close writes the trailer.
func NewWriter(w io.Writer) *Writer { return &Writer{w: bufio.NewWriterSize(w, 1<<20), ino: 1} }

func (c *Writer) header(name string, mode uint32, size int64) error {
	if size > 0xffffffff {
		return fmt.Errorf("cpio: %s: %d bytes is too large", name, size)
	}
	nlink := uint32(1)
	if mode&0o170000 == 0o040000 {
		nlink = 2
	}
	h := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, len(name)+1, 0)
	c.ino++
	if err := c.write([]byte(h + name + "\x00")); err != nil {
		return err
	}
	return c.pad()
}

func (c *Writer) write(b []byte) error {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return err
}

func (c *Writer) pad() error {
	if r := c.n % 4; r != 0 {
		return c.write(make([]byte, 4-r))
	}
	return nil
}

// Dir adds a directory (parents must have been added).
func (c *Writer) Dir(name string, perm uint32) error {
	return c.header(name, 0o040000|perm, 0)
}

// File adds a regular file with the contents of r (size bytes).
func (c *Writer) File(name string, perm uint32, r io.Reader, size int64) error {
	if err := c.header(name, 0o100000|perm, size); err != nil {
		return err
	}
	n, err := io.Copy(c.w, io.LimitReader(r, size))
	c.n += n
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("cpio: %s: short file (%d of %d bytes)", name, n, size)
	}
	return c.pad()
}

// HostFile adds the host file src as name.
func (c *Writer) HostFile(name string, perm uint32, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	return c.File(name, perm, f, st.Size())
}

// Close writes the trailer and flushes.
func (c *Writer) Close() error {
	if err := c.header("TRAILER!!!", 0, 0); err != nil {
		return err
	}
	return c.w.Flush()
}
