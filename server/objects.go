package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sync"
)

// objectStore keeps file contents by sha256 (dir/ab/abcd...): every
// checkpoint of a sandbox shares it, so a file unchanged since an earlier
// checkpoint is not stored again. Only the server writes it; nothing of
// it is inside a sandbox.
type objectStore struct{ dir string }

// Compiled on first use: every process start (sandboxes' inits included)
// would pay for it at package init.
var sha256Hex = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{64}$`) })

func (o *objectStore) path(sum string) string { return filepath.Join(o.dir, sum[:2], sum) }

func (o *objectStore) has(sum string) bool {
	_, err := os.Lstat(o.path(sum))
	return err == nil
}

// put stores f's content (size bytes), read and written by its data
// blocks only (holes stay holes), and returns its sparseHash and the
// data bytes it stored (0: the store had it).
func (o *objectStore) put(f *os.File, size int64, sc *scan) (string, int64, error) {
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return "", 0, err
	}
	tmp, err := os.CreateTemp(o.dir, "put-*")
	if err != nil {
		return "", 0, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	before := sc.data
	// What is hashed is what is written: the copy's name is its content's.
	sum, err := sparseHash(f, size, sc, tmp)
	if err == nil {
		err = tmp.Truncate(size)
	}
	if err != nil {
		return "", 0, err
	}
	if o.has(sum) {
		return sum, 0, nil
	}
	if err := os.MkdirAll(filepath.Dir(o.path(sum)), 0o700); err != nil {
		return "", 0, err
	}
	if err := tmp.Chmod(0o400); err != nil {
		return "", 0, err
	}
	return sum, sc.data - before, os.Rename(tmp.Name(), o.path(sum))
}

// verify hashes every file of m in the store (as m's version hashes): a
// missing or changed object is a corrupt error naming the workspace file
// it holds.
func (o *objectStore) verify(ctx context.Context, m *manifest, what string) error {
	seen := map[string]bool{}
	for _, e := range m.Entries {
		if e.Kind != "file" || seen[e.SHA256] {
			continue
		}
		if !sha256Hex().MatchString(e.SHA256) {
			return errCorrupt("%s: file %q: bad hash %q in the manifest", what, e.Path, e.SHA256)
		}
		f, err := os.Open(o.path(e.SHA256))
		if errors.Is(err, fs.ErrNotExist) {
			return errCorrupt("%s: file %q: its stored content %s is missing", what, e.Path, e.SHA256)
		}
		if err != nil {
			return fmt.Errorf("%s: file %q: %w", what, e.Path, err)
		}
		var sum string
		fi, err := f.Stat()
		if err == nil {
			sum, err = sparseHash(f, fi.Size(), newScan(ctx, what, m.Version), nil)
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: file %q: %w", what, e.Path, err)
		}
		if sum != e.SHA256 {
			return errCorrupt("%s: file %q: stored content %s was changed (it hashes to %s)", what, e.Path, e.SHA256, sum)
		}
		seen[e.SHA256] = true
	}
	return nil
}

// sweep removes objects no manifest in keep refers to.
func (o *objectStore) sweep(keep []*manifest) error {
	live := map[string]bool{}
	for _, m := range keep {
		for _, e := range m.Entries {
			if e.Kind == "file" {
				live[e.SHA256] = true
			}
		}
	}
	return filepath.WalkDir(o.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() && !live[d.Name()] {
			return os.Remove(p)
		}
		return nil
	})
}
