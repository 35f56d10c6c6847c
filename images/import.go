package images

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/airlock-dev/airlock/errdefs"
)

// ImportOptions configure an Import.
type ImportOptions struct {
	// Tag names the imported image (then the archive must hold exactly
	// one); empty: the names the archive gives (repo tags of a `docker
	// save` tarball, ref names of an OCI layout).
	Tag      string
	Progress func(Progress)
}

// Import adds the images of path to the store: a `docker save` tarball
// (a tar with manifest.json; its layers may be tars or gzip) or an OCI
// image layout directory (with index.json; for a multi-platform index,
// the linux image of this machine's architecture). It returns what it
// added.
func (s *Store) Import(ctx context.Context, path string, opts ImportOptions) ([]*Image, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w: %w", path, err, errdefs.ErrInvalid)
	}
	var srcs []importSource
	if fi.IsDir() {
		srcs, err = layoutImages(path)
	} else {
		srcs, err = tarballImages(path)
	}
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	if len(srcs) == 0 {
		return nil, fmt.Errorf("import %s: no image in it: %w", path, errdefs.ErrInvalid)
	}
	if opts.Tag != "" {
		if len(srcs) != 1 {
			return nil, fmt.Errorf("import %s: --tag names one image, the archive holds %d: %w", path, len(srcs), errdefs.ErrInvalid)
		}
		t, err := ParseTag(opts.Tag)
		if err != nil {
			return nil, fmt.Errorf("import %s: %w", path, err)
		}
		srcs[0].names = []string{t.Name()}
	}
	var out []*Image
	for _, src := range srcs {
		im, err := s.add(ctx, src.img, addOptions{names: src.names, progress: opts.Progress})
		if err != nil {
			return out, fmt.Errorf("import %s: %w", path, err)
		}
		out = append(out, im)
	}
	return out, nil
}

type importSource struct {
	img   v1.Image
	names []string
}

// tarballImages reads a `docker save` tarball's manifest.json and opens
// each image it lists.
func tarballImages(path string) ([]importSource, error) {
	entries, err := dockerManifest(path)
	if err != nil {
		return nil, err
	}
	opener := func() (io.ReadCloser, error) { return os.Open(path) }
	var out []importSource
	for i, e := range entries {
		var names []string
		for _, t := range e.RepoTags {
			tag, err := ParseTag(t)
			if err != nil {
				return nil, fmt.Errorf("manifest.json entry %d: %w", i, err)
			}
			names = append(names, tag.Name())
		}
		var tag *name.Tag
		if len(e.RepoTags) > 0 {
			t, _ := name.NewTag(e.RepoTags[0])
			tag = &t
		}
		if tag == nil && len(entries) > 1 {
			return nil, fmt.Errorf("manifest.json entry %d has no tag in a tarball of %d images: %w", i, len(entries), errdefs.ErrInvalid)
		}
		img, err := tarball.Image(opener, tag)
		if err != nil {
			return nil, fmt.Errorf("docker save tarball: %v: %w", err, errdefs.ErrInvalid)
		}
		out = append(out, importSource{img: img, names: names})
	}
	return out, nil
}

// dockerManifest reads manifest.json of a tarball (bounded).
func dockerManifest(path string) ([]struct{ RepoTags []string }, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("not a docker save tarball (no manifest.json) nor an OCI layout directory: %w", errdefs.ErrInvalid)
		}
		if err != nil {
			return nil, fmt.Errorf("not a docker save tarball: %v: %w", err, errdefs.ErrInvalid)
		}
		if h.Name != "manifest.json" && h.Name != "./manifest.json" {
			continue
		}
		var m []struct{ RepoTags []string }
		if err := json.NewDecoder(io.LimitReader(tr, 16<<20)).Decode(&m); err != nil {
			return nil, fmt.Errorf("manifest.json: %v: %w", err, errdefs.ErrInvalid)
		}
		return m, nil
	}
}

// layoutImages opens an OCI layout's images: each manifest of its
// index, a nested index resolved to this machine's platform.
func layoutImages(path string) ([]importSource, error) {
	p, err := layout.FromPath(path)
	if err != nil {
		return nil, fmt.Errorf("not an OCI layout: %v: %w", err, errdefs.ErrInvalid)
	}
	ii, err := p.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("OCI layout: %v: %w", err, errdefs.ErrInvalid)
	}
	return indexImages(ii, nil)
}

func indexImages(ii v1.ImageIndex, names []string) ([]importSource, error) {
	m, err := ii.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("OCI index: %v: %w", err, errdefs.ErrInvalid)
	}
	var out []importSource
	for _, d := range m.Manifests {
		n := names
		if ref := d.Annotations["org.opencontainers.image.ref.name"]; ref != "" {
			// A full reference names the image; a bare tag ("latest", as
			// some tools write) names nothing on its own.
			if t, err := ParseTag(ref); err == nil && strings.ContainsAny(ref, "/:") {
				n = append(append([]string{}, names...), t.Name())
			}
		}
		switch {
		case d.MediaType.IsIndex():
			child, err := ii.ImageIndex(d.Digest)
			if err != nil {
				return nil, fmt.Errorf("OCI index %s: %v: %w", d.Digest, err, errdefs.ErrInvalid)
			}
			sub, err := indexImages(child, n)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
		case d.MediaType.IsImage():
			if d.Platform != nil && (d.Platform.OS != "linux" || d.Platform.Architecture != runtime.GOARCH) {
				continue
			}
			img, err := ii.Image(d.Digest)
			if err != nil {
				return nil, fmt.Errorf("OCI image %s: %v: %w", d.Digest, err, errdefs.ErrInvalid)
			}
			out = append(out, importSource{img: img, names: n})
		}
	}
	return out, nil
}
