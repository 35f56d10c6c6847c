package microvm

import (
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/airlock-dev/airlock/internal/cpio"
)

// writeInitramfs writes the guest's initramfs: the airlock binary as
// /init, the kernel modules and their load order.
func writeInitramfs(w io.Writer, agentBin string, modules []string, modulesDir, orderFile string) error {
	c := cpio.NewWriter(w)
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
