// Package objstore keeps what a checkpoint, a pause or a snapshot
// records of a sandbox's workspace: manifests (every entry's kind, mode,
// owner and content hash), the content-addressed objects behind them,
// and the scans, restores and owner shifts that read and write them, by
// data extents so a sparse file costs what it holds on disk.
//
// It never follows a link out of the tree it reads or restores (everything
// goes through os.Root or O_NOFOLLOW), never uses a file that no longer
// matches its manifest (it says which one, as a CorruptError), and knows
// nothing of HTTP, tenants or sandboxes' lifecycles.
package objstore

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

// Store keeps file contents by sha256 (dir/ab/abcd...): every
// checkpoint of a sandbox shares it, so a file unchanged since an earlier
// checkpoint is not stored again. Only the server writes it; nothing of
// it is inside a sandbox.
type Store struct{ dir string }

// New is the object store in dir (made on the first put).
func New(dir string) *Store { return &Store{dir: dir} }

// Compiled on first use: every process start (sandboxes' inits included)
// would pay for it at package init.
var sha256Hex = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{64}$`) })

func (o *Store) path(sum string) string { return filepath.Join(o.dir, sum[:2], sum) }

func (o *Store) has(sum string) bool {
	_, err := os.Lstat(o.path(sum))
	return err == nil
}

// put stores f's content (size bytes), read and written by its data
// blocks only (holes stay holes), and returns its sparseHash and the
// data bytes it stored (0: the store had it).
func (o *Store) put(f *os.File, size int64, sc *Scan) (string, int64, error) {
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

// Verify hashes every file of m in the store (as m's version hashes): a
// missing or changed object is a corrupt error naming the workspace file
// it holds.
func (o *Store) Verify(ctx context.Context, m *Manifest, what string) error {
	seen := map[string]bool{}
	for _, e := range m.Entries {
		if e.Kind != "file" || seen[e.SHA256] {
			continue
		}
		if !sha256Hex().MatchString(e.SHA256) {
			return Corrupt("%s: file %q: bad hash %q in the manifest", what, e.Path, e.SHA256)
		}
		f, err := os.Open(o.path(e.SHA256))
		if errors.Is(err, fs.ErrNotExist) {
			return Corrupt("%s: file %q: its stored content %s is missing", what, e.Path, e.SHA256)
		}
		if err != nil {
			return fmt.Errorf("%s: file %q: %w", what, e.Path, err)
		}
		var sum string
		fi, err := f.Stat()
		if err == nil {
			sum, err = sparseHash(f, fi.Size(), NewScan(ctx, what, m.Version), nil)
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: file %q: %w", what, e.Path, err)
		}
		if sum != e.SHA256 {
			return Corrupt("%s: file %q: stored content %s was changed (it hashes to %s)", what, e.Path, e.SHA256, sum)
		}
		seen[e.SHA256] = true
	}
	return nil
}

// Sweep removes objects no manifest in keep refers to.
func (o *Store) Sweep(keep []*Manifest) error {
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
