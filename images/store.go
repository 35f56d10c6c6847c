package images

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/errdefs"
)

// Store is an image store rooted at one directory. It is safe for
// concurrent use, by goroutines and by processes (a server and CLI runs
// sharing /var/lib/airlock/images): changes to the index and the layers
// happen under the store's file lock.
type Store struct {
	root string
	log  *slog.Logger
	// unpackLimit bounds the bytes one layer may unpack to.
	unpackLimit int64
}

// Options configure a Store.
type Options struct {
	Log *slog.Logger
	// MaxLayerBytes bounds what one layer may unpack to (0: 64 GiB): a
	// compressed layer can expand a thousandfold.
	MaxLayerBytes int64
}

// DefaultRoot is the store of this user: /var/lib/airlock/images as root,
// else $XDG_DATA_HOME/airlock/images (~/.local/share/airlock/images).
func DefaultRoot() string {
	if os.Geteuid() == 0 {
		return "/var/lib/airlock/images"
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "airlock", "images")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "share", "airlock", "images")
}

// Open opens (making it when missing) the store at root and removes what
// interrupted operations left in tmp/.
func Open(root string, opts Options) (*Store, error) {
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("open image store %q: not an absolute path: %w", root, errdefs.ErrInvalid)
	}
	if err := checkPlatform(); err != nil {
		return nil, fmt.Errorf("open image store %q: %w", root, err)
	}
	s := &Store{root: filepath.Clean(root), log: opts.Log, unpackLimit: opts.MaxLayerBytes}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.unpackLimit <= 0 {
		s.unpackLimit = 64 << 30
	}
	if err := os.MkdirAll(filepath.Dir(s.root), 0o755); err != nil {
		return nil, fmt.Errorf("open image store: %w", err)
	}
	if err := os.Mkdir(s.root, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("open image store: %w", err)
	}
	// Unpacked layers keep their owners and modes: no other host user
	// may reach into them.
	if err := os.Chmod(s.root, 0o700); err != nil {
		return nil, fmt.Errorf("open image store: %w", err)
	}
	for _, d := range []string{"blobs/sha256", "layers/sha256", "leases", "tmp"} {
		if err := os.MkdirAll(filepath.Join(s.root, d), 0o700); err != nil {
			return nil, fmt.Errorf("open image store: %w", err)
		}
	}
	s.sweepTmp()
	return s, nil
}

// Root is the store's directory.
func (s *Store) Root() string { return s.root }

func (s *Store) blobPath(digest string) string {
	return filepath.Join(s.root, "blobs", "sha256", strings.TrimPrefix(digest, "sha256:"))
}

func (s *Store) layerDir(diffID string, setID bool) string {
	d := filepath.Join(s.root, "layers", "sha256", strings.TrimPrefix(diffID, "sha256:"))
	if setID {
		return d + "+setid"
	}
	return d
}

// LayerFS is the unpacked tree of a layer (in overlayfs form: whiteouts
// are 0/0 character devices, opaque directories carry
// user.overlay.opaque).
func LayerFS(dir string) string { return filepath.Join(dir, "fs") }

// index is index.json.
type index struct {
	Version int               `json:"version"`
	Images  map[string]*Image `json:"images"`          // by ID
	Cache   map[string]string `json:"cache,omitempty"` // build cache key -> image ID
}

func (s *Store) indexPath() string { return filepath.Join(s.root, "index.json") }

// readIndex reads the index; callers that change it hold the lock.
func (s *Store) readIndex() (*index, error) {
	ix := &index{Version: 1, Images: map[string]*Image{}, Cache: map[string]string{}}
	b, err := os.ReadFile(s.indexPath())
	if errors.Is(err, fs.ErrNotExist) {
		return ix, nil
	}
	if err != nil {
		return nil, fmt.Errorf("image store: read index: %w", err)
	}
	if err := json.Unmarshal(b, ix); err != nil {
		return nil, fmt.Errorf("image store: index %s: %v: %w", s.indexPath(), err, errdefs.ErrUnavailable)
	}
	if ix.Images == nil {
		ix.Images = map[string]*Image{}
	}
	if ix.Cache == nil {
		ix.Cache = map[string]string{}
	}
	return ix, nil
}

// writeIndex replaces the index atomically (under the lock).
func (s *Store) writeIndex(ix *index) error {
	b, err := json.MarshalIndent(ix, "", "  ")
	if err != nil {
		return err
	}
	tmp := s.indexPath() + ".tmp"
	if err := writeFileSync(tmp, b, 0o600); err != nil {
		return fmt.Errorf("image store: write index: %w", err)
	}
	if err := os.Rename(tmp, s.indexPath()); err != nil {
		return fmt.Errorf("image store: write index: %w", err)
	}
	return nil
}

func writeFileSync(p string, b []byte, mode fs.FileMode) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// update runs fn on the index under the store's lock and writes it back
// when fn returns nil.
func (s *Store) update(ctx context.Context, fn func(ix *index) error) error {
	l, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer l.unlock()
	ix, err := s.readIndex()
	if err != nil {
		return err
	}
	if err := fn(ix); err != nil {
		return err
	}
	return s.writeIndex(ix)
}

// lock takes the store's exclusive lock, waiting for it (bounded by ctx).
func (s *Store) lock(ctx context.Context) (*fileLock, error) {
	return lockFile(ctx, filepath.Join(s.root, "lock"), true)
}

// List returns the store's images (build cache entries left out), newest
// first.
func (s *Store) List(ctx context.Context) ([]*Image, error) {
	ix, err := s.readIndex()
	if err != nil {
		return nil, err
	}
	var out []*Image
	for _, im := range ix.Images {
		if !im.Cache || len(im.Names) > 0 {
			out = append(out, im)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Added.Equal(out[j].Added) {
			return out[i].Added.After(out[j].Added)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// Inspect finds an image by name ("debian:bookworm"), by
// "NAME@sha256:..." (its manifest digest), or by ID or a unique prefix of
// at least 6 hex digits. ErrNotFound when the store has no such image.
func (s *Store) Inspect(ctx context.Context, ref string) (*Image, error) {
	ix, err := s.readIndex()
	if err != nil {
		return nil, err
	}
	return find(ix, ref)
}

func find(ix *index, ref string) (*Image, error) {
	if isHexID(ref) {
		h := strings.TrimPrefix(ref, "sha256:")
		var hits []*Image
		for id, im := range ix.Images {
			if strings.HasPrefix(strings.TrimPrefix(id, "sha256:"), h) {
				hits = append(hits, im)
			}
		}
		switch len(hits) {
		case 1:
			return hits[0], nil
		case 0:
			// maybe a name that looks like hex ("abcdef:latest" needs a tag)
		default:
			return nil, fmt.Errorf("image %q: ambiguous ID prefix (%d images): %w", ref, len(hits), errdefs.ErrInvalid)
		}
	}
	r, err := ParseName(ref)
	if err != nil {
		return nil, err
	}
	full := r.Name()
	for _, im := range ix.Images {
		if slices.Contains(im.Names, full) || slices.Contains(im.RepoDigests, full) {
			return im, nil
		}
		if strings.Contains(full, "@") && strings.HasSuffix(full, "@"+im.Digest) {
			return im, nil
		}
	}
	return nil, fmt.Errorf("image %q: not in the store (airlock image pull %s): %w", ref, ref, errdefs.ErrNotFound)
}

// Remove takes the name ref off its image; an image left without names
// (or named by ID) is removed when no sandbox uses it, its layers by the
// next Prune. It returns the image.
func (s *Store) Remove(ctx context.Context, ref string) (*Image, error) {
	var out *Image
	err := s.update(ctx, func(ix *index) error {
		im, err := find(ix, ref)
		if err != nil {
			return err
		}
		out = im
		byName := false
		if r, err := ParseName(ref); err == nil && !isHexID(ref) {
			full := r.Name()
			if slices.Contains(im.Names, full) {
				im.Names = slices.DeleteFunc(im.Names, func(n string) bool { return n == full })
				byName = true
			}
		}
		if !byName {
			im.Names = nil
		}
		if len(im.Names) == 0 {
			if s.inUse(ix)[im.ID] {
				return nil // kept until its sandboxes end; Prune removes it then
			}
			delete(ix.Images, im.ID)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("remove image %q: %w", ref, err)
	}
	return out, nil
}

// newTemp makes a private directory under tmp/ and returns it with the
// lock that marks it in use (released by the cleanup, which removes it).
func (s *Store) newTemp(prefix string) (string, func(), error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	dir := filepath.Join(s.root, "tmp", prefix+hex.EncodeToString(b[:]))
	l, err := lockFile(context.Background(), dir+".lock", true)
	if err != nil {
		return "", nil, err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		l.unlock()
		os.Remove(dir + ".lock")
		return "", nil, fmt.Errorf("image store: %w", err)
	}
	return dir, func() {
		if err := removeTree(dir); err != nil {
			s.log.Warn("image store: remove temp dir", "dir", dir, "err", err)
		}
		os.Remove(dir + ".lock")
		l.unlock()
	}, nil
}

// sweepTmp removes what a crashed or killed operation left under tmp/:
// every entry whose lock nobody holds.
func (s *Store) sweepTmp() {
	dir := filepath.Join(s.root, "tmp")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, ".lock") {
			continue
		}
		p := filepath.Join(dir, name)
		l, err := tryLock(p + ".lock")
		if err != nil || l == nil {
			continue // in use, or not ours to judge
		}
		if err := removeTree(p); err != nil {
			s.log.Warn("image store: remove stale temp dir", "dir", p, "err", err)
		}
		os.Remove(p + ".lock")
		l.unlock()
	}
	// Locks without a directory (killed between the two steps).
	for _, e := range ents {
		if name, ok := strings.CutSuffix(e.Name(), ".lock"); ok {
			if _, err := os.Lstat(filepath.Join(dir, name)); errors.Is(err, fs.ErrNotExist) {
				if l, _ := tryLock(filepath.Join(dir, e.Name())); l != nil {
					os.Remove(filepath.Join(dir, e.Name()))
					l.unlock()
				}
			}
		}
	}
}

// copyVerified writes r to path, checking its sha256 against digest and
// its size against size (when > 0).
func copyVerified(path string, r io.Reader, digest string, size int64, progress func(int64)) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	h := newDigester()
	w := io.MultiWriter(f, h)
	var n int64
	buf := make([]byte, 256<<10)
	for {
		m, rerr := r.Read(buf)
		if m > 0 {
			if _, err := w.Write(buf[:m]); err != nil {
				f.Close()
				return err
			}
			n += int64(m)
			if progress != nil {
				progress(n)
			}
			if size > 0 && n > size {
				f.Close()
				return fmt.Errorf("blob %s: more than the %d bytes the manifest says: %w", digest, size, errdefs.ErrInvalid)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			f.Close()
			if size > 0 && n == size {
				// All of it came, and the reader refused it at its end
				// (go-containerregistry verifies as it reads): say why.
				if got := h.digest(); got != digest {
					return fmt.Errorf("blob %s: content has digest %s: %w", digest, got, errCorrupt)
				}
			}
			return fmt.Errorf("download: %w", rerr)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if got := h.digest(); got != digest {
		return fmt.Errorf("blob %s: content has digest %s: %w", digest, got, errCorrupt)
	}
	if size > 0 && n != size {
		return fmt.Errorf("blob %s: %d bytes, the manifest says %d: %w", digest, n, size, errCorrupt)
	}
	return nil
}

// errCorrupt marks content that does not match its digest.
var errCorrupt = fmt.Errorf("content does not match its digest: %w", errdefs.ErrInvalid)

// now is time.Now, UTC and to the second (stable JSON).
func now() time.Time { return time.Now().UTC().Truncate(time.Second) }
