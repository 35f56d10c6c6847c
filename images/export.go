package images

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/airlock-dev/airlock/errdefs"
)

// Export API: what other backends (the Docker backend loads images into
// dockerd from here) and the builder use.
//
//	img, err := store.V1Image(ctx, "debian:bookworm") // a go-containerregistry v1.Image
//	err = store.Export(ctx, "debian:bookworm", w)     // a `docker save` tarball, for `docker load`
//
// Both read the blobs as stored; layers come compressed as they were
// pulled (tarballs of imports stay uncompressed).

// V1Image returns the stored image ref as a go-containerregistry image
// backed by the store's blobs. The blobs stay readable while the image
// is in the store: hold an Acquire lease to keep it there.
func (s *Store) V1Image(ctx context.Context, ref string) (v1.Image, *Image, error) {
	im, err := s.Inspect(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	img, err := partial.CompressedToImage(&storedImage{s: s, im: im})
	if err != nil {
		return nil, nil, fmt.Errorf("image %q: %w", ref, err)
	}
	return img, im, nil
}

// Export writes ref as a `docker save` tarball (loadable with `docker
// load`), tagged with the image's names.
func (s *Store) Export(ctx context.Context, ref string, w io.Writer) error {
	img, im, err := s.V1Image(ctx, ref)
	if err != nil {
		return fmt.Errorf("export %q: %w", ref, err)
	}
	refs := map[name.Reference]v1.Image{}
	for _, n := range im.Names {
		if t, err := name.NewTag(n); err == nil {
			refs[t] = img
		}
	}
	if len(refs) == 0 {
		// An untagged image: docker load names it by ID.
		d, _ := name.NewDigest("airlock.invalid/untagged@" + im.Digest)
		refs[d] = img
	}
	if err := tarball.MultiRefWrite(refs, w); err != nil {
		return fmt.Errorf("export %q: %w", ref, err)
	}
	return nil
}

// storedImage is partial.CompressedImageCore over the store's blobs.
type storedImage struct {
	s  *Store
	im *Image
}

func (si *storedImage) RawConfigFile() ([]byte, error) { return si.readBlob(si.im.ID) }
func (si *storedImage) MediaType() (types.MediaType, error) {
	return types.MediaType(si.im.ManifestType), nil
}
func (si *storedImage) RawManifest() ([]byte, error) { return si.readBlob(si.im.Digest) }

func (si *storedImage) readBlob(digest string) ([]byte, error) {
	b, err := os.ReadFile(si.s.blobPath(digest))
	if err != nil {
		return nil, fmt.Errorf("blob %s: %v: %w", digest, err, errdefs.ErrNotFound)
	}
	if digestOf(b) != digest {
		return nil, fmt.Errorf("blob %s: %w", digest, errCorrupt)
	}
	return b, nil
}

func (si *storedImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	for _, l := range si.im.Layers {
		if l.Digest == h.String() {
			return &storedLayer{s: si.s, l: l}, nil
		}
	}
	// The config blob is asked for by digest too.
	if h.String() == si.im.ID {
		return &storedLayer{s: si.s, l: Layer{Digest: si.im.ID, MediaType: string(types.OCIConfigJSON)}}, nil
	}
	return nil, fmt.Errorf("image %s: no layer %s: %w", si.im.ID, h, errdefs.ErrNotFound)
}

// storedLayer is partial.CompressedLayer over one stored blob.
type storedLayer struct {
	s *Store
	l Layer
}

func (sl *storedLayer) Digest() (v1.Hash, error) { return v1.NewHash(sl.l.Digest) }
func (sl *storedLayer) Compressed() (io.ReadCloser, error) {
	return os.Open(sl.s.blobPath(sl.l.Digest))
}
func (sl *storedLayer) Size() (int64, error) {
	fi, err := os.Stat(sl.s.blobPath(sl.l.Digest))
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
func (sl *storedLayer) MediaType() (types.MediaType, error) {
	return types.MediaType(sl.l.MediaType), nil
}
func (sl *storedLayer) DiffID() (v1.Hash, error) { return v1.NewHash(sl.l.DiffID) }
