// Command prep writes a guest kernel directory for the microvm backend from
// Debian's linux-image package unpacked by `dpkg-deb -x` (see
// scripts/guest-kernel.sh, the only caller): the uncompressed vmlinux, the
// modules the guest loads in load order, and kernel.json. Build time only.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/airlock-dev/airlock/backend/microvm/internal/guestkernel"
)

func main() {
	root := flag.String("root", "", "the unpacked package (dpkg-deb -x)")
	out := flag.String("out", "", "directory to write")
	pkg := flag.String("package", "", "package name")
	version := flag.String("version", "", "package version")
	debSum := flag.String("deb-sha256", "", "checksum of the .deb")
	flag.Parse()
	if err := run(*root, *out, guestkernel.Manifest{Package: *pkg, Version: *version, DebSHA256: *debSum}); err != nil {
		fmt.Fprintln(os.Stderr, "guest-kernel:", err)
		os.Exit(1)
	}
}

func run(root, out string, m guestkernel.Manifest) error {
	if root == "" || out == "" {
		return fmt.Errorf("-root and -out are required")
	}
	rels, err := filepath.Glob(filepath.Join(root, "lib/modules/*"))
	if err != nil || len(rels) != 1 {
		return fmt.Errorf("want exactly one lib/modules/RELEASE in %s, found %v", root, rels)
	}
	m.Release = filepath.Base(rels[0])
	bz, err := os.ReadFile(filepath.Join(root, "boot", "vmlinuz-"+m.Release))
	if err != nil {
		return err
	}
	img, err := guestkernel.Vmlinux(bz)
	if err != nil {
		return err
	}
	mods, err := guestkernel.Index(os.DirFS(rels[0]))
	if err != nil {
		return err
	}
	order, err := guestkernel.LoadOrder(mods, guestkernel.Wanted)
	if err != nil {
		return err
	}
	tmp := out + ".tmp"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(filepath.Join(tmp, "modules"), 0o755); err != nil {
		return err
	}
	m.Vmlinux = "vmlinux"
	sum := sha256.Sum256(img)
	m.VmlinuxSH = hex.EncodeToString(sum[:])
	if err := os.WriteFile(filepath.Join(tmp, m.Vmlinux), img, 0o644); err != nil {
		return err
	}
	for _, mod := range order {
		b, err := os.ReadFile(filepath.Join(rels[0], mod.Path))
		if err != nil {
			return err
		}
		name := mod.Name + ".ko"
		if err := os.WriteFile(filepath.Join(tmp, "modules", name), b, 0o644); err != nil {
			return err
		}
		m.Modules = append(m.Modules, name)
	}
	j, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, "kernel.json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	os.RemoveAll(out)
	return os.Rename(tmp, out)
}
