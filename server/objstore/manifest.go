package objstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/airlock-dev/airlock/sandbox"
)

// A manifest lists every entry of a sandbox's workspace with its kind,
// mode, owner (relative to the sandbox's host id range) and, for files,
// size and sha256. Checkpoints and pauses record one; rollback and resume
// compare against it, so a changed file is named, never silently used.
type Manifest struct {
	Version int     `json:"version"`
	Entries []Entry `json:"entries"`
}

// Entry is one file, directory or symlink of a Manifest.
type Entry struct {
	Path   string `json:"path"` // slash-separated, relative to the workspace
	Kind   string `json:"kind"` // dir, file, symlink
	Mode   uint32 `json:"mode"` // permission, set-id and sticky bits (os.FileMode)
	UID    int    `json:"uid"`  // relative to the sandbox's host id range
	GID    int    `json:"gid"`
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Target string `json:"target,omitempty"` // a symlink's
}

// Version 2 hashes files with sparseHash (version 1: plain
// sha256 of the whole content, still read and checked).
const Version = 2

// Owner is the host id range base of a sandbox's files (uid and gid of id
// 0 inside); {0, 0} when its ids are the host's.
type Owner struct{ UID, GID int }

// CorruptError names what no longer matches its manifest (the API
// answers it 409 "corrupt"). It wraps sandbox.ErrInvalid.
type CorruptError struct{ err error }

func (e *CorruptError) Error() string { return e.err.Error() }
func (e *CorruptError) Unwrap() error { return e.err }

// Corrupt is a CorruptError with a formatted message.
func Corrupt(format string, args ...any) error {
	return &CorruptError{fmt.Errorf(format+": %w", append(args, sandbox.ErrInvalid)...)}
}

const modeBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// ScanTree walks the tree at dir (through an os.Root: no symlink leads
// out of it, whatever the sandbox made) and returns its manifest. With
// store set, each file's content is put in the object store (once per
// content: a file whose content is there already costs one read).
// newBytes is what it stored.
// sc bounds the scan (its deadline, the data it may record) and says how
// files are hashed (sparseHash).
func ScanTree(dir string, base Owner, store *Store, sc *Scan) (m *Manifest, newBytes int64, skipped int, err error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, 0, 0, err
	}
	defer root.Close()
	m = &Manifest{Version: Version, Entries: []Entry{}}
	if sc.v1 {
		m.Version = 1
	}
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, werr error) error {
		if werr != nil {
			return werr
		}
		if p == "." {
			return nil
		}
		fi, err := root.Lstat(p)
		if err != nil {
			return err
		}
		e := Entry{Path: p, Mode: uint32(fi.Mode() & modeBits)}
		e.UID, e.GID = fileOwner(fi, base)
		switch {
		case fi.IsDir():
			e.Kind = "dir"
		case fi.Mode()&fs.ModeSymlink != 0:
			e.Kind = "symlink"
			if e.Target, err = root.Readlink(p); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			e.Kind = "file"
			n, err := hashEntry(root, p, &e, store, sc)
			if err != nil {
				return err
			}
			newBytes += n
		default:
			skipped++ // sockets, fifos, devices: not files a workspace restores
			return nil
		}
		m.Entries = append(m.Entries, e)
		return nil
	})
	if err != nil {
		return nil, 0, 0, err
	}
	return m, newBytes, skipped, nil
}

// hashEntry fills e's size and hash from the file p of root, storing its
// content in store when store lacks it; it returns the bytes stored.
func hashEntry(root *os.Root, p string, e *Entry, store *Store, sc *Scan) (int64, error) {
	f, err := root.OpenFile(p, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("%s: changed while read (not a regular file now)", p)
	}
	e.Size = fi.Size()
	if store == nil {
		e.SHA256, err = sparseHash(f, e.Size, sc, nil)
		return 0, err
	}
	// One read: the data is copied as it is hashed; the stored copy is
	// named by what it holds (the sandbox may write the file meanwhile).
	sum, stored, err := store.put(f, e.Size, sc)
	e.SHA256 = sum
	return stored, err
}

// WriteManifest writes m to path (atomically) and returns its sha256.
func WriteManifest(path string, m *Manifest) (string, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// ReadManifest reads the manifest at path, refusing one whose sha256 is
// not want (what the store recorded when it was written).
func ReadManifest(path, want, what string) (*Manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, Corrupt("%s: manifest %s is missing", what, filepath.Base(path))
		}
		return nil, fmt.Errorf("%s: read manifest: %w", what, err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != want {
		return nil, Corrupt("%s: manifest %s was changed (sha256 %x, recorded %s)", what, filepath.Base(path), sum, want)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil || (m.Version != 1 && m.Version != Version) {
		return nil, Corrupt("%s: manifest %s: not a version 1 or %d manifest", what, filepath.Base(path), Version)
	}
	return &m, nil
}

// CompareManifests returns a corrupt error naming the first entry where
// got differs from want (a file changed, added or removed), else nil.
func CompareManifests(want, got *Manifest, what string) error {
	idx := make(map[string]Entry, len(got.Entries))
	for _, e := range got.Entries {
		idx[e.Path] = e
	}
	for _, w := range want.Entries {
		g, ok := idx[w.Path]
		switch {
		case !ok:
			return Corrupt("%s: file %q is missing", what, w.Path)
		case g != w:
			return Corrupt("%s: file %q changed (%s)", what, w.Path, entryDiff(w, g))
		}
		delete(idx, w.Path)
	}
	for p := range idx {
		return Corrupt("%s: file %q was added", what, p)
	}
	return nil
}

func entryDiff(w, g Entry) string {
	switch {
	case w.Kind != g.Kind:
		return fmt.Sprintf("was a %s, is a %s", w.Kind, g.Kind)
	case w.SHA256 != g.SHA256:
		return fmt.Sprintf("sha256 %s, recorded %s", g.SHA256, w.SHA256)
	case w.Mode != g.Mode:
		return fmt.Sprintf("mode %v, recorded %v", fs.FileMode(g.Mode), fs.FileMode(w.Mode))
	case w.Target != g.Target:
		return fmt.Sprintf("link to %q, recorded %q", g.Target, w.Target)
	}
	return fmt.Sprintf("owner %d:%d, recorded %d:%d", g.UID, g.GID, w.UID, w.GID)
}
