package microvm

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/backend/microvm/internal/bootproto"
	"github.com/airlock-dev/airlock/sandbox"
)

// Template files (RAM and device state, in CacheDir) are named by
// templateKey; tmpPrefix while being made.
const tmpPrefix = ".tmp-"

// template returns the template for l, making it on first use (one boot
// and save; concurrent Creates wait for it). Nil when templates are off or
// making one failed (logged: Create then boots the VM itself, which is
// slower but the same sandbox).
func (b *Backend) template(ctx context.Context, l layout, log *slog.Logger) *Template {
	if b.cfg.NoTemplates {
		return nil
	}
	b.tmplMu.Lock()
	defer b.tmplMu.Unlock()
	key, err := b.templateKey(ctx, l)
	if err != nil {
		log.Warn("microvm: no template, booting instead", "layout", l.key(), "err", err)
		return nil
	}
	if t, ok := b.templates[key]; ok {
		if _, err := os.Stat(t.StateFile); err == nil {
			return t
		}
		delete(b.templates, key)
	}
	// A template an earlier process made for the same initramfs, QEMU and
	// layout serves as well (`airlock run` restores instead of booting).
	t := b.templateFiles(key)
	if st, err := os.Stat(t.StateFile); err == nil {
		if _, err := os.Stat(t.MemFile); err == nil {
			t.StateSize = st.Size()
			b.templates[key] = t
			return t
		}
	}
	if t, err = b.makeTemplate(ctx, l, key); err != nil {
		log.Warn("microvm: no template, booting instead", "layout", l.key(), "err", err)
		return nil
	}
	b.templates[key] = t
	return t
}

// templateKey names a template by everything its state depends on: the
// layout, the initramfs (agent binary and kernel) and the VMM's version.
func (b *Backend) templateKey(ctx context.Context, l layout) (string, error) {
	info := b.Info(ctx)
	if info.Err != nil {
		return "", info.Err
	}
	initrd, err := b.initramfs(info.kernel)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256([]byte(filepath.Base(initrd) + "|" + info.QEMUVersion + "|" + l.key()))
	return "tmpl-" + l.key() + "-" + hex.EncodeToString(h[:6]), nil
}

func (b *Backend) templateFiles(key string) *Template {
	return &Template{Key: key, MemFile: filepath.Join(b.cfg.CacheDir, key+".mem"), StateFile: filepath.Join(b.cfg.CacheDir, key+".state")}
}

// Prepare makes the template for sandboxes like spec (same RAM, vCPUs and
// accelerator) now, so the first Create restores instead of booting (a
// pool or a server warms it before the first request). Idempotent.
func (b *Backend) Prepare(ctx context.Context, spec sandbox.Spec) (*Template, error) {
	p, err := b.prepare(ctx, spec)
	if err != nil {
		return nil, err
	}
	t := b.template(ctx, p.layout, p.log)
	if t == nil {
		return nil, fmt.Errorf("prepare template %s: %w", p.layout.key(), sandbox.ErrUnavailable)
	}
	return t, nil
}

// makeTemplate boots a VM with RAM in a shared-memory file and every share
// device on the empty directory, waits for its init's ready byte and saves
// its device state. The VMM is then killed; RAM and state files remain.
func (b *Backend) makeTemplate(ctx context.Context, l layout, key string) (_ *Template, err error) {
	t0 := time.Now()
	info := b.Info(ctx)
	if info.Err != nil {
		return nil, info.Err
	}
	initrd, err := b.initramfs(info.kernel)
	if err != nil {
		return nil, err
	}
	var rnd [4]byte
	rand.Read(rnd[:])
	id := "tmpl-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(rnd[:])
	if err := b.templateDirs(); err != nil {
		return nil, err
	}
	// Made under temporary names, renamed into place RAM first, state
	// last: a state file on disk always has its RAM file.
	final := b.templateFiles(key)
	t := &Template{Key: key, MemFile: filepath.Join(b.cfg.CacheDir, tmpPrefix+id+".mem"), StateFile: filepath.Join(b.cfg.CacheDir, tmpPrefix+id+".state")}
	defer func() {
		os.Remove(t.MemFile)
		os.Remove(t.StateFile)
	}()
	dir := filepath.Join(b.vmsDir(), id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cg := newVMCgroup(b.cfg.CgroupParent + "/" + id)
	if err := cg.create(int64(l.MemMiB)<<20+vmmOverhead, float64(l.VCPUs)); err != nil {
		return nil, err
	}
	defer cg.remove()
	m := &Machine{
		ID: id, Dir: dir, Kernel: info.kernel.Vmlinux, Initrd: initrd, Cmdline: kernelCmdline(l.KVM),
		VCPUs: l.VCPUs, MemoryMiB: l.MemMiB, KVM: l.KVM, Shares: b.padShares(nil),
		MemFile: t.MemFile, Shared: true, Cgroups: cg.dirs(),
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	vm, err := b.driver(info).Start(ctx, m)
	if err != nil {
		return nil, err
	}
	defer vm.Kill()
	if err := saveBooted(ctx, vm, t.StateFile); err != nil {
		return nil, err
	}
	vm.Kill()
	if st, err := os.Stat(t.StateFile); err == nil {
		final.StateSize = st.Size()
	}
	if err := os.Rename(t.MemFile, final.MemFile); err != nil {
		return nil, err
	}
	if err := os.Rename(t.StateFile, final.StateFile); err != nil {
		return nil, err
	}
	final.BuildMillis = time.Since(t0).Milliseconds()
	b.log.Debug("template made", "key", key, "state_bytes", final.StateSize, "ms", final.BuildMillis)
	return final, nil
}

// templateDirs makes the directories a template is made in, and refuses
// a template directory on tmpfs.
func (b *Backend) templateDirs() error {
	for _, d := range []string{b.vmsDir(), b.emptyDir(), b.cfg.CacheDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	os.Chmod(b.emptyDir(), 0o555)
	var fs unix.Statfs_t
	if err := unix.Statfs(b.cfg.CacheDir, &fs); err == nil && (fs.Type == unix.TMPFS_MAGIC || fs.Type == unix.RAMFS_MAGIC) {
		return fmt.Errorf("template dir %s is tmpfs: a VM restored from a RAM file there would double its memory (set CacheDir to a disk-backed directory)", b.cfg.CacheDir)
	}
	return nil
}

// saveBooted waits for the booting vm's init to send its ready byte and
// saves the VM's device state to file.
func saveBooted(ctx context.Context, vm VM, file string) error {
	conn, err := vm.Channel(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	var r [1]byte
	if _, err := io.ReadFull(conn, r[:]); err != nil || r[0] != bootproto.Ready {
		return fmt.Errorf("template boot: no ready byte (%v): %s", err, lastLines(vm.Output(), 4))
	}
	if err := vm.SaveState(ctx, file); err != nil {
		return fmt.Errorf("template save: %w", err)
	}
	return nil
}

// Templates lists the templates this Backend made.
func (b *Backend) Templates() []Template {
	b.tmplMu.Lock()
	defer b.tmplMu.Unlock()
	var out []Template
	for _, t := range b.templates {
		out = append(out, *t)
	}
	return out
}

// RemoveTemplates deletes every template on disk (they are caches: the
// next Create makes one again). Sandboxes restored from them keep running
// (their RAM mapping holds the pages).
func (b *Backend) RemoveTemplates() error {
	b.tmplMu.Lock()
	defer b.tmplMu.Unlock()
	var errs []error
	for _, pat := range []string{filepath.Join(b.cfg.CacheDir, "tmpl-*.mem"), filepath.Join(b.cfg.CacheDir, "tmpl-*.state")} {
		files, _ := filepath.Glob(pat)
		for _, f := range files {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	clear(b.templates)
	return errors.Join(errs...)
}

// inUse reports whether a VM directory belongs to this process's own
// template or probe boot (Cleanup leaves those alone).
func inUse(id string) bool {
	return (strings.HasPrefix(id, "tmpl-") || strings.HasPrefix(id, "kvmprobe-")) && strings.Contains(id+"-", "-"+strconv.Itoa(os.Getpid())+"-")
}
