package images

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/v1"
)

// The build cache: a build step's result is an image of the store (kept
// out of List, removed by Prune(all)) found by the step's key.

// Cached returns the image a build step with key made, if the store
// still has it.
func (s *Store) Cached(ctx context.Context, key string) (*Image, bool) {
	ix, err := s.readIndex()
	if err != nil {
		return nil, false
	}
	id, ok := ix.Cache[key]
	if !ok {
		return nil, false
	}
	im, ok := ix.Images[id]
	return im, ok
}

// AddCached brings a build step's result into the store under key.
func (s *Store) AddCached(ctx context.Context, key string, img v1.Image, progress func(Progress)) (*Image, error) {
	im, err := s.add(ctx, img, addOptions{cache: true, progress: progress})
	if err != nil {
		return nil, fmt.Errorf("build cache: %w", err)
	}
	err = s.update(ctx, func(ix *index) error {
		ix.Cache[key] = im.ID
		return nil
	})
	return im, err
}
