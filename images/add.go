package images

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/airlock-dev/airlock/errdefs"
)

// addOptions are what an ingestion of one image needs besides the image.
type addOptions struct {
	names       []string // normalised names to give it
	repoDigests []string
	progress    func(Progress)
	cache       bool // a build step's result
}

// staged is a layer fetched and unpacked under tmp/, waiting to be moved
// into place.
type staged struct {
	layer   Layer
	blob    string // staged blob file ("" when the store has it)
	dir     string // staged layer directory ("" when the store has it)
	release func()
}

// add brings img into the store: every layer not there yet is fetched,
// verified against its digest, unpacked and verified against its diff ID
// under tmp/, then moved into place with the index under the lock. On
// any error nothing of it is left.
func (s *Store) add(ctx context.Context, img v1.Image, opts addOptions) (_ *Image, err error) {
	progress := opts.progress
	if progress == nil {
		progress = func(Progress) {}
	}
	mt, err := img.MediaType()
	if err != nil {
		return nil, err
	}
	rawManifest, err := img.RawManifest()
	if err != nil {
		return nil, err
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	rawConfig, err := img.RawConfigFile()
	if err != nil {
		return nil, err
	}
	cf, err := v1.ParseConfigFile(bytes.NewReader(rawConfig))
	if err != nil {
		return nil, fmt.Errorf("image config: %v: %w", err, errdefs.ErrInvalid)
	}
	cfgDigest := digestOf(rawConfig)
	if m.Config.Digest.String() != cfgDigest {
		return nil, fmt.Errorf("image config: digest %s, the manifest says %s: %w", cfgDigest, m.Config.Digest, errCorrupt)
	}
	if cf.OS != "" && cf.OS != "linux" {
		return nil, fmt.Errorf("image is for %s/%s: only linux images run in sandboxes: %w", cf.OS, cf.Architecture, errdefs.ErrInvalid)
	}
	if len(m.Layers) != len(cf.RootFS.DiffIDs) {
		return nil, fmt.Errorf("image: %d layers in the manifest, %d diff IDs in the config: %w", len(m.Layers), len(cf.RootFS.DiffIDs), errdefs.ErrInvalid)
	}
	im := &Image{
		ID: cfgDigest, Digest: digestOf(rawManifest), ManifestType: string(mt),
		Names: opts.names, RepoDigests: opts.repoDigests, Added: now(), Cache: opts.cache,
		Created: cf.Created.UTC(), Platform: platformOf(cf),
		Config: Config{
			Env: cf.Config.Env, User: cf.Config.User, WorkingDir: cf.Config.WorkingDir,
			Entrypoint: cf.Config.Entrypoint, Cmd: cf.Config.Cmd, Labels: cf.Config.Labels, StopSignal: cf.Config.StopSignal,
		},
	}
	var stages []*staged
	defer func() {
		for _, st := range stages {
			st.release()
		}
	}()
	for i, desc := range m.Layers {
		if !desc.MediaType.IsDistributable() {
			return nil, fmt.Errorf("layer %d: foreign layer %s (%s): not supported: %w", i, desc.Digest, desc.MediaType, errdefs.ErrInvalid)
		}
		l := Layer{DiffID: cf.RootFS.DiffIDs[i].String(), Digest: desc.Digest.String(), MediaType: string(desc.MediaType), Size: desc.Size}
		if !validDigest(l.DiffID) || !validDigest(l.Digest) {
			return nil, fmt.Errorf("layer %d: digest %s / diff ID %s: only sha256 is supported: %w", i, l.Digest, l.DiffID, errdefs.ErrInvalid)
		}
		im.Layers = append(im.Layers, l)
		im.Size += l.Size
		st, err := s.stage(ctx, img, l, progress)
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", l.Digest, err)
		}
		stages = append(stages, st)
	}
	for _, st := range stages {
		im.Unpacked += st.unpacked(s)
	}
	if err := s.commit(ctx, im, rawManifest, rawConfig, stages); err != nil {
		return nil, err
	}
	progress(Progress{Phase: PhaseDone})
	return im, nil
}

// unpacked is the layer's unpacked size (from its meta.json, staged or
// already in the store).
func (st *staged) unpacked(s *Store) int64 {
	dir := st.dir
	if dir == "" {
		dir = s.layerDir(st.layer.DiffID, false)
	}
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		return 0
	}
	var r unpackResult
	_ = json.Unmarshal(b, &r)
	return r.Bytes
}

// stage fetches and unpacks one layer under tmp/ unless the store has it.
func (s *Store) stage(ctx context.Context, img v1.Image, l Layer, progress func(Progress)) (*staged, error) {
	st := &staged{layer: l, release: func() {}}
	haveBlob := exists(s.blobPath(l.Digest))
	haveDir := exists(LayerFS(s.layerDir(l.DiffID, false)))
	if haveBlob && haveDir {
		progress(Progress{Layer: l.Digest, Phase: PhaseExists, Done: l.Size, Total: l.Size})
		return st, nil
	}
	tmp, release, err := s.newTemp("layer-")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			release()
		}
	}()
	st.release = release
	blob := s.blobPath(l.Digest)
	if !haveBlob {
		layer, err := img.LayerByDigest(v1Hash(l.Digest))
		if err != nil {
			return nil, err
		}
		rc, err := layer.Compressed()
		if err != nil {
			return nil, err
		}
		blob = filepath.Join(tmp, "blob")
		err = copyVerified(blob, ctxReader{ctx, rc}, l.Digest, l.Size, func(n int64) {
			progress(Progress{Layer: l.Digest, Phase: PhaseDownload, Done: n, Total: l.Size})
		})
		rc.Close()
		if err != nil {
			return nil, err
		}
		st.blob = blob
	}
	if !haveDir {
		progress(Progress{Layer: l.Digest, Phase: PhaseUnpack, Total: l.Size})
		dir := filepath.Join(tmp, "layer")
		if err := s.unpackBlob(ctx, blob, l, dir, false); err != nil {
			return nil, err
		}
		st.dir = dir
	}
	progress(Progress{Layer: l.Digest, Phase: PhaseDone, Done: l.Size, Total: l.Size})
	ok = true
	return st, nil
}

// unpackBlob unpacks the blob file of l into dir (made here, holding fs/
// and meta.json), checking the diff ID.
func (s *Store) unpackBlob(ctx context.Context, blob string, l Layer, dir string, setID bool) error {
	if err := os.MkdirAll(LayerFS(dir), 0o755); err != nil {
		return err
	}
	f, err := os.Open(blob)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := decompress(bufio.NewReaderSize(ctxReader{ctx, f}, 1<<20))
	if err != nil {
		return err
	}
	defer r.Close()
	diffID, res, err := unpackLayer(r, LayerFS(dir), unpackOptions{keepSetID: setID, chown: os.Geteuid() == 0, limit: s.unpackLimit})
	if err != nil {
		return err
	}
	if diffID != l.DiffID {
		return fmt.Errorf("unpacked content has diff ID %s, the config says %s: %w", diffID, l.DiffID, errCorrupt)
	}
	if res.NSkipped > 0 {
		s.log.Info("image layer: entries left out", "layer", l.Digest, "count", res.NSkipped, "first", res.Skipped)
	}
	b, _ := json.Marshal(res)
	return writeFileSync(filepath.Join(dir, "meta.json"), b, 0o600)
}

// unpackStored unpacks a stored layer blob again (the set-id variant).
func (s *Store) unpackStored(ctx context.Context, l Layer, setID bool) error {
	tmp, release, err := s.newTemp("layer-")
	if err != nil {
		return err
	}
	defer release()
	dir := filepath.Join(tmp, "layer")
	if err := s.unpackBlob(ctx, s.blobPath(l.Digest), l, dir, setID); err != nil {
		return fmt.Errorf("layer %s: %w", l.Digest, err)
	}
	lk, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer lk.unlock()
	if err := os.Rename(dir, s.layerDir(l.DiffID, setID)); err != nil && !exists(s.layerDir(l.DiffID, setID)) {
		return err
	}
	return nil
}

// commit moves the staged blobs and layers into place and records the
// image, under the lock (so Prune never sees placed, unrecorded layers).
func (s *Store) commit(ctx context.Context, im *Image, rawManifest, rawConfig []byte, stages []*staged) error {
	return s.update(ctx, func(ix *index) error {
		for _, b := range []struct {
			digest string
			data   []byte
		}{{im.Digest, rawManifest}, {im.ID, rawConfig}} {
			if !exists(s.blobPath(b.digest)) {
				if err := writeFileSync(s.blobPath(b.digest)+".tmp", b.data, 0o600); err != nil {
					return err
				}
				if err := os.Rename(s.blobPath(b.digest)+".tmp", s.blobPath(b.digest)); err != nil {
					return err
				}
			}
		}
		for _, st := range stages {
			if st.blob != "" && !exists(s.blobPath(st.layer.Digest)) {
				if err := os.Rename(st.blob, s.blobPath(st.layer.Digest)); err != nil {
					return err
				}
			}
			if st.dir != "" && !exists(s.layerDir(st.layer.DiffID, false)) {
				if err := os.Rename(st.dir, s.layerDir(st.layer.DiffID, false)); err != nil {
					return err
				}
			}
		}
		if old, ok := ix.Images[im.ID]; ok {
			// Same image again: keep when it came first, add names.
			im.Added = old.Added
			im.Names = union(old.Names, im.Names)
			im.RepoDigests = union(old.RepoDigests, im.RepoDigests)
			im.Cache = old.Cache && im.Cache
			if old.Digest != im.Digest {
				im.Digest = old.Digest // the config is the image; keep its first manifest
			}
		}
		// A name names one image: taking it moves it.
		for _, other := range ix.Images {
			if other.ID == im.ID {
				continue
			}
			other.Names = slices.DeleteFunc(other.Names, func(n string) bool { return slices.Contains(im.Names, n) })
		}
		ix.Images[im.ID] = im
		return nil
	})
}

func union(a, b []string) []string {
	out := append([]string{}, a...)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func digestOf(b []byte) string {
	d := newDigester()
	d.Write(b)
	return d.digest()
}

func v1Hash(s string) v1.Hash {
	h, _ := v1.NewHash(s)
	return h
}

func platformOf(cf *v1.ConfigFile) string {
	p := cf.OS + "/" + cf.Architecture
	if cf.Variant != "" {
		p += "/" + cf.Variant
	}
	return p
}

// decompress detects gzip and zstd by their magic numbers; anything else
// is read as an uncompressed tar.
func decompress(r *bufio.Reader) (io.ReadCloser, error) {
	magic, err := r.Peek(4)
	if err != nil && err != io.EOF {
		return nil, err
	}
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("gzip: %v: %w", err, errdefs.ErrInvalid)
		}
		return z, nil
	case len(magic) == 4 && bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		z, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("zstd: %v: %w", err, errdefs.ErrInvalid)
		}
		return z.IOReadCloser(), nil
	}
	return io.NopCloser(r), nil
}

// ctxReader ends a read when its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// AddOptions configure AddImage.
type AddOptions struct {
	Names    []string // references to name it by (normalised here)
	Progress func(Progress)
}

// AddImage brings a go-containerregistry image (from anywhere: a build, a
// test, another store) into the store, as Pull and Import do.
func (s *Store) AddImage(ctx context.Context, img v1.Image, opts AddOptions) (*Image, error) {
	var names []string
	for _, n := range opts.Names {
		t, err := ParseTag(n)
		if err != nil {
			return nil, fmt.Errorf("add image: %w", err)
		}
		names = append(names, t.Name())
	}
	im, err := s.add(ctx, img, addOptions{names: names, progress: opts.Progress})
	if err != nil {
		return nil, fmt.Errorf("add image: %w", err)
	}
	return im, nil
}
