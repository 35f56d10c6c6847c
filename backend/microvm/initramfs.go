package microvm

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// cpioWriter writes a "newc" cpio archive, the format the kernel unpacks
// as its initramfs. Only what an initramfs needs: directories and regular
// files, owned by root.
type cpioWriter struct {
	w   *bufio.Writer
	ino uint32
	n   int64
}

func newCPIO(w io.Writer) *cpioWriter { return &cpioWriter{w: bufio.NewWriterSize(w, 1<<20), ino: 1} }

func (c *cpioWriter) header(name string, mode uint32, size int64) error {
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

func (c *cpioWriter) write(b []byte) error {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return err
}

func (c *cpioWriter) pad() error {
	if r := c.n % 4; r != 0 {
		return c.write(make([]byte, 4-r))
	}
	return nil
}

// Dir adds a directory (parents must have been added).
func (c *cpioWriter) Dir(name string, perm uint32) error {
	return c.header(name, 0o040000|perm, 0)
}

// File adds a regular file with the contents of r (size bytes).
func (c *cpioWriter) File(name string, perm uint32, r io.Reader, size int64) error {
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
func (c *cpioWriter) HostFile(name string, perm uint32, src string) error {
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
func (c *cpioWriter) Close() error {
	if err := c.header("TRAILER!!!", 0, 0); err != nil {
		return err
	}
	return c.w.Flush()
}

// writeInitramfs writes the guest's initramfs: the airlock binary as
// /init, the kernel modules and their load order.
func writeInitramfs(w io.Writer, agentBin string, modules []string, modulesDir, orderFile string) error {
	c := newCPIO(w)
	made := map[string]bool{}
	var mkdirs func(d string) error
	mkdirs = func(d string) error {
		if d == "." || d == "/" || d == "" || made[d] {
			return nil
		}
		if err := mkdirs(path.Dir(d)); err != nil {
			return err
		}
		made[d] = true
		return c.Dir(d, 0o755)
	}
	if err := c.HostFile("init", 0o755, agentBin); err != nil {
		return fmt.Errorf("initramfs: agent binary: %w", err)
	}
	if err := mkdirs(modulesDir); err != nil {
		return err
	}
	var names []string
	for _, m := range modules {
		name := path.Base(m)
		if err := c.HostFile(modulesDir+"/"+name, 0o644, m); err != nil {
			return fmt.Errorf("initramfs: module: %w", err)
		}
		names = append(names, name)
	}
	order := strings.Join(names, "\n") + "\n"
	if err := mkdirs(path.Dir(orderFile)); err != nil {
		return err
	}
	if err := c.File(orderFile, 0o644, strings.NewReader(order), int64(len(order))); err != nil {
		return err
	}
	return c.Close()
}
