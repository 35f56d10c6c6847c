package images

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/airlock-dev/airlock/errdefs"
)

// ParseName normalises an image reference the way Docker does ("debian"
// is "index.docker.io/library/debian:latest"). A reference with a digest
// keeps it ("REPO@sha256:..."). It never contacts a registry.
func ParseName(ref string) (name.Reference, error) {
	if ref == "" {
		return nil, fmt.Errorf("image reference: empty: %w", errdefs.ErrInvalid)
	}
	if len(ref) > 512 {
		return nil, fmt.Errorf("image reference %.40q...: longer than 512 bytes: %w", ref, errdefs.ErrInvalid)
	}
	r, err := name.ParseReference(ref, name.WithDefaultTag("latest"))
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %v: %w", ref, err, errdefs.ErrInvalid)
	}
	return r, nil
}

// ParseTag parses a name an image is given (a tag, never a digest), as in
// `image build -t NAME` or `image import --tag NAME`.
func ParseTag(ref string) (name.Tag, error) {
	if strings.Contains(ref, "@") {
		return name.Tag{}, fmt.Errorf("image name %q: a name cannot hold a digest: %w", ref, errdefs.ErrInvalid)
	}
	r, err := ParseName(ref)
	if err != nil {
		return name.Tag{}, err
	}
	t, ok := r.(name.Tag)
	if !ok {
		return name.Tag{}, fmt.Errorf("image name %q: not a tag: %w", ref, errdefs.ErrInvalid)
	}
	return t, nil
}

// ShortName is how a stored name is shown: Docker Hub's registry and
// "library/" left out ("debian:bookworm").
func ShortName(n string) string {
	n = strings.TrimPrefix(n, name.DefaultRegistry+"/")
	return strings.TrimPrefix(n, "library/")
}

// isHexID reports whether s looks like an image ID or a prefix of one
// (at least 6 hex digits, optionally "sha256:").
func isHexID(s string) bool {
	h := strings.TrimPrefix(s, "sha256:")
	if len(h) < 6 || len(h) > 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
