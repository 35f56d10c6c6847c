package images

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Prune removes images nobody names (with all, every image no sandbox
// uses, build cache included), then every layer directory and blob no
// remaining image refers to, and what interrupted operations left in
// tmp/. Images in use by a sandbox (a live Acquire lease) are kept.
func (s *Store) Prune(ctx context.Context, all bool) (*PruneReport, error) {
	rep := &PruneReport{}
	l, err := s.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("prune images: %w", err)
	}
	defer l.unlock()
	ix, err := s.readIndex()
	if err != nil {
		return nil, fmt.Errorf("prune images: %w", err)
	}
	used := s.inUse(ix)
	for id, im := range ix.Images {
		if used[id] {
			continue
		}
		if all || len(im.Names) == 0 && !im.Cache {
			delete(ix.Images, id)
			rep.Images = append(rep.Images, id)
		}
	}
	for k, id := range ix.Cache {
		if _, ok := ix.Images[id]; !ok {
			delete(ix.Cache, k)
		}
	}
	if err := s.writeIndex(ix); err != nil {
		return nil, fmt.Errorf("prune images: %w", err)
	}
	keepBlobs, keepLayers := map[string]bool{}, map[string]bool{}
	for _, im := range ix.Images {
		keepBlobs[hexOf(im.ID)], keepBlobs[hexOf(im.Digest)] = true, true
		for _, ly := range im.Layers {
			keepBlobs[hexOf(ly.Digest)] = true
			keepLayers[hexOf(ly.DiffID)] = true
		}
	}
	blobs := filepath.Join(s.root, "blobs", "sha256")
	if ents, err := os.ReadDir(blobs); err == nil {
		for _, e := range ents {
			if keepBlobs[strings.TrimSuffix(e.Name(), ".tmp")] && !strings.HasSuffix(e.Name(), ".tmp") {
				continue
			}
			p := filepath.Join(blobs, e.Name())
			rep.Bytes += size(p)
			if os.Remove(p) == nil {
				rep.Blobs++
			}
		}
	}
	layers := filepath.Join(s.root, "layers", "sha256")
	if ents, err := os.ReadDir(layers); err == nil {
		for _, e := range ents {
			if keepLayers[strings.TrimSuffix(e.Name(), "+setid")] {
				continue
			}
			p := filepath.Join(layers, e.Name())
			rep.Bytes += treeSize(p)
			if removeTree(p) == nil {
				rep.Layers++
			}
		}
	}
	s.sweepTmp()
	return rep, nil
}

func hexOf(d string) string { return strings.TrimPrefix(d, "sha256:") }

func size(p string) int64 {
	fi, err := os.Lstat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func treeSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
