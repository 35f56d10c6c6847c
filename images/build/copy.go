package build

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/errdefs"
)

// copy is COPY and ADD of files of the build context.
func (b *builder) copy(in Instruction, args string) error {
	parts := in.Exec
	if parts == nil {
		parts = words(args)
	}
	if len(parts) < 2 {
		return fmt.Errorf("want SRC... DEST: %w", errdefs.ErrInvalid)
	}
	srcs, dst := parts[:len(parts)-1], parts[len(parts)-1]
	for _, s := range srcs {
		if in.Cmd == "ADD" && (strings.Contains(s, "://") || strings.HasPrefix(s, "git@")) {
			return fmt.Errorf("ADD of a URL (%s) is not supported: fetch it in a RUN step (with --allow for its host): %w", s, errdefs.ErrNotSupported)
		}
		if in.Cmd == "ADD" && isArchive(s) {
			return fmt.Errorf("ADD of an archive (%s) would unpack it, which is not supported: COPY it and RUN tar x: %w", s, errdefs.ErrNotSupported)
		}
	}
	cf, err := b.img.ConfigFile()
	if err != nil {
		return err
	}
	dstIsDir := strings.HasSuffix(dst, "/")
	if !path.IsAbs(dst) {
		dst = path.Join("/", cf.Config.WorkingDir, dst)
	}
	dst = path.Clean(dst)
	r, err := b.hold("copy")
	if err != nil {
		return err
	}
	defer r.Release()
	if r != nil {
		if fi, err := r.Lstat(dst); err == nil && fi.IsDir() {
			dstIsDir = true
		}
	}
	uid, gid, mode, err := parseFlags(in.Flags, func(spec string) (int, int, error) {
		if r == nil {
			return 0, 0, errNoUser
		}
		u, err := r.User(spec)
		return u.UID, u.GID, err
	})
	if err != nil {
		return err
	}
	parentOf := dst
	if !dstIsDir {
		parentOf = path.Dir(dst)
	}
	parents, err := b.missingDirs(parentOf)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(b.o.Context)
	if err != nil {
		return err
	}
	defer root.Close()
	tmp := filepath.Join(b.o.WritableDir, "copy-"+randHex()+".tar")
	if err := os.MkdirAll(b.o.WritableDir, 0o700); err != nil {
		return err
	}
	defer os.Remove(tmp)
	l, content, err := copyLayer(root, srcs, dst, dstIsDir, uid, gid, mode, tmp, parents)
	if err != nil {
		return err
	}
	step := in.Cmd + " " + content + " " + dst
	if b.cached(chain(b.key, step)) {
		return nil
	}
	return b.appendLayer(step, in.Cmd+" "+args, l)
}

func isArchive(s string) bool {
	for _, ext := range []string{".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar.zst"} {
		if strings.HasSuffix(strings.ToLower(s), ext) {
			return true
		}
	}
	return false
}
