package wasm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// files is sandbox.Files over the sandbox's mounts: the same view and the
// same refusals (outside the mounts, denied, read-only, leaving a mount
// through ".." or a symlink) as its modules have.
type files struct{ s *wasmSandbox }

var _ sandbox.Files = (*files)(nil)

// at resolves p for op, checking the sandbox is alive and, for writes,
// that the mount is writable.
func (f *files) at(op, p string, a access) (*mount, string, error) {
	if f.s.isClosed() {
		return nil, "", fmt.Errorf("%s %q in %q: %w", op, p, f.s.id, sandbox.ErrClosed)
	}
	m, rel, err := f.s.mounts.resolve(p)
	if err != nil {
		return nil, "", fmt.Errorf("%s in %q: %w", op, f.s.id, err)
	}
	if a != accessRead && m.readOnly {
		return nil, "", fmt.Errorf("%s %q in %q: read-only: %w", op, p, f.s.id, sandbox.ErrPermission)
	}
	if e := m.rules.check(m.root, rel, a); e != 0 {
		return nil, "", fmt.Errorf("%s %q in %q: denied by policy: %w", op, p, f.s.id, sandbox.ErrPermission)
	}
	return m, rel, nil
}

// kindErr wraps an os.Root error with the sandbox error kind it means.
func (f *files) kindErr(op, p string, err error) error {
	var kind error
	var denied *deniedError
	switch {
	case errors.As(err, &denied):
		return fmt.Errorf("%s %q in %q: %w", op, p, f.s.id, err)
	case isEscape(err):
		kind = sandbox.ErrPermission
		err = errors.New("path leaves the sandbox's filesystem")
	case errors.Is(err, fs.ErrNotExist):
		kind = sandbox.ErrNotFound
	case errors.Is(err, fs.ErrExist):
		kind = sandbox.ErrExists
	case errors.Is(err, fs.ErrPermission):
		kind = sandbox.ErrPermission
	default:
		kind = sandbox.ErrInvalid
	}
	return fmt.Errorf("%s %q in %q: %v: %w", op, p, f.s.id, err, kind)
}

func (f *files) ReadFile(ctx context.Context, p string) (io.ReadCloser, error) {
	m, rel, err := f.at("read", p, accessRead)
	if err != nil {
		return nil, err
	}
	file, err := m.root.Open(rel)
	if err != nil {
		return nil, f.kindErr("read", p, err)
	}
	if e := m.rules.checkOpened(m.root, file, accessRead); e != 0 {
		file.Close()
		return nil, fmt.Errorf("read %q in %q: denied by policy: %w", p, f.s.id, sandbox.ErrPermission)
	}
	st, err := file.Stat()
	if err != nil || st.IsDir() {
		file.Close()
		if err == nil {
			err = errors.New("is a directory")
		}
		return nil, f.kindErr("read", p, err)
	}
	return file, nil
}

func (f *files) WriteFile(ctx context.Context, p string, r io.Reader, mode fs.FileMode, mkdirs bool) error {
	m, rel, err := f.at("write", p, accessWrite)
	if err != nil {
		return err
	}
	if rel == "." {
		return fmt.Errorf("write %q in %q: is a directory: %w", p, f.s.id, sandbox.ErrInvalid)
	}
	if mode&fs.ModePerm == 0 {
		mode = 0o644
	}
	if mkdirs {
		if err := f.mkdirAll(m, path.Dir(rel), 0o755); err != nil {
			return f.kindErr("write", p, err)
		}
	}
	if m.rules.active(accessWrite) {
		if fi, err := m.root.Lstat(rel); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("write %q in %q: through a symlink where the policy protects paths: %w", p, f.s.id, sandbox.ErrPermission)
		}
	}
	var file *os.File
	err = m.rules.guarded(m.root, rel, writeOp(m.root, rel), func() (err error) {
		file, err = m.root.OpenFile(rel, os.O_WRONLY|os.O_CREATE, mode&fs.ModePerm)
		return err
	})
	if err != nil {
		return f.kindErr("write", p, err)
	}
	if e := m.rules.checkOpened(m.root, file, accessWrite); e != 0 {
		file.Close()
		return fmt.Errorf("write %q in %q: denied by policy: %w", p, f.s.id, sandbox.ErrPermission)
	}
	if err := file.Truncate(0); err != nil {
		file.Close()
		return f.kindErr("write", p, err)
	}
	n, err := io.Copy(file, r)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %q in %q: %w", p, f.s.id, err)
	}
	f.s.emit(audit.TypeFile, "write "+p, map[string]any{"path": p, "bytes": n})
	return nil
}

func (f *files) info(m *mount, p, rel string, fi fs.FileInfo) sandbox.FileInfo {
	out := sandbox.FileInfo{
		Name:    fi.Name(),
		Path:    p,
		Size:    fi.Size(),
		Mode:    fi.Mode(),
		ModTime: fi.ModTime(),
		IsDir:   fi.IsDir(),
	}
	if rel == "." {
		out.Name = path.Base(p)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		out.Link, _ = m.root.Readlink(rel)
	}
	return out
}

func (f *files) Stat(ctx context.Context, p string) (sandbox.FileInfo, error) {
	m, rel, err := f.at("stat", p, accessRead)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	fi, err := m.root.Lstat(rel)
	if err != nil {
		return sandbox.FileInfo{}, f.kindErr("stat", p, err)
	}
	return f.info(m, path.Clean(p), rel, fi), nil
}

func (f *files) List(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	m, rel, err := f.at("list", p, accessRead)
	if err != nil {
		return nil, err
	}
	dir, err := m.root.Open(rel)
	if err != nil {
		return nil, f.kindErr("list", p, err)
	}
	defer dir.Close()
	entries, err := dir.ReadDir(-1)
	if err != nil {
		return nil, f.kindErr("list", p, err)
	}
	out := make([]sandbox.FileInfo, 0, len(entries))
	for _, e := range entries {
		childRel := path.Join(rel, e.Name())
		if denied(m.rules.deny, childRel) {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, f.info(m, path.Join(path.Clean(p), e.Name()), childRel, fi))
	}
	return out, nil
}

func (f *files) Mkdir(ctx context.Context, p string, mode fs.FileMode, parents bool) error {
	m, rel, err := f.at("mkdir", p, accessWrite)
	if err != nil {
		return err
	}
	if mode&fs.ModePerm == 0 {
		mode = 0o755
	}
	if parents {
		err = f.mkdirAll(m, rel, mode&fs.ModePerm)
	} else {
		err = m.rules.guarded(m.root, rel, policy.OpMkdir, func() error { return m.root.Mkdir(rel, mode&fs.ModePerm) })
	}
	if err != nil {
		return f.kindErr("mkdir", p, err)
	}
	return nil
}

func (f *files) Remove(ctx context.Context, p string, recursive bool) error {
	m, rel, err := f.at("remove", p, accessRemove)
	if err != nil {
		return err
	}
	if rel == "." {
		return fmt.Errorf("remove %q in %q: a mount point cannot be removed: %w", p, f.s.id, sandbox.ErrPermission)
	}
	if recursive {
		if _, err := m.root.Lstat(rel); err != nil {
			return f.kindErr("remove", p, err)
		}
		err = m.root.RemoveAll(rel)
	} else {
		err = m.root.Remove(rel)
	}
	if err != nil {
		return f.kindErr("remove", p, err)
	}
	f.s.emit(audit.TypeFile, "remove "+p, map[string]any{"path": p, "recursive": recursive})
	return nil
}

func (f *files) Rename(ctx context.Context, from, to string) error {
	mf, relFrom, err := f.at("rename", from, accessRemove)
	if err != nil {
		return err
	}
	mt, relTo, err := f.at("rename", to, accessRemove)
	if err != nil {
		return err
	}
	if mf != mt {
		return fmt.Errorf("rename %q to %q in %q: across mounts: %w", from, to, f.s.id, sandbox.ErrInvalid)
	}
	if relFrom == "." || relTo == "." {
		return fmt.Errorf("rename %q to %q in %q: a mount point cannot be renamed: %w", from, to, f.s.id, sandbox.ErrPermission)
	}
	fi, err := mf.root.Lstat(relFrom)
	if err == nil {
		err = mf.rules.guardedRename(mf.root, relFrom, relTo, fi, func() error { return mf.root.Rename(relFrom, relTo) })
	}
	if err != nil {
		return f.kindErr("rename", from, err)
	}
	f.s.emit(audit.TypeFile, "rename "+from, map[string]any{"from": from, "to": to})
	return nil
}

// mkdirAll creates rel and its missing parents, each one allowed by the
// guard first.
func (f *files) mkdirAll(m *mount, rel string, perm fs.FileMode) error {
	rel = path.Clean(rel)
	if rel == "." {
		return nil
	}
	if fi, err := m.root.Stat(rel); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s: not a directory", rel)
		}
		return nil
	}
	if err := f.mkdirAll(m, path.Dir(rel), perm); err != nil {
		return err
	}
	err := m.rules.guarded(m.root, rel, policy.OpMkdir, func() error { return m.root.Mkdir(rel, perm) })
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	return err
}
