package images

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/airlock-dev/airlock/errdefs"
)

// PullOptions configure a Pull.
type PullOptions struct {
	// Keychain finds credentials for a registry; nil: the usual Docker
	// config ($DOCKER_CONFIG/config.json, ~/.docker/config.json, with
	// its credential helpers).
	Keychain authn.Keychain
	// Platform to pick from a multi-platform image; empty: linux and
	// this machine's architecture.
	Platform string
	// Progress receives reports as layers download and unpack.
	Progress func(Progress)
	// Transport is the HTTP transport (tests); nil: the default.
	Transport http.RoundTripper
}

// Pull fetches ref from its registry into the store and names it ref.
// Layers the store already has are not fetched again. On any error
// (unreachable registry, refused credentials, a connection broken half
// way, content that does not match its digest) nothing of the pull is
// left in the store.
func (s *Store) Pull(ctx context.Context, ref string, opts PullOptions) (*Image, error) {
	r, err := ParseName(ref)
	if err != nil {
		return nil, fmt.Errorf("pull %q: %w", ref, err)
	}
	kc := opts.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	plat := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	if opts.Platform != "" {
		p, err := v1.ParsePlatform(opts.Platform)
		if err != nil {
			return nil, fmt.Errorf("pull %q: platform %q: %v: %w", ref, opts.Platform, err, errdefs.ErrInvalid)
		}
		plat = *p
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc), remote.WithPlatform(plat), remote.WithUserAgent("airlock")}
	if opts.Transport != nil {
		ropts = append(ropts, remote.WithTransport(opts.Transport))
	}
	img, err := remote.Image(r, ropts...)
	if err != nil {
		return nil, fmt.Errorf("pull %q: %w", ref, registryError(err))
	}
	names := []string{}
	if _, ok := r.(name.Tag); ok {
		names = append(names, r.Name())
	}
	var repoDigests []string
	if d, err := img.Digest(); err == nil {
		repoDigests = append(repoDigests, r.Context().Name()+"@"+d.String())
	}
	im, err := s.add(ctx, img, addOptions{names: names, repoDigests: repoDigests, progress: opts.Progress})
	if err != nil {
		return nil, fmt.Errorf("pull %q: %w", ref, registryError(err))
	}
	return im, nil
}

// registryError gives a registry's answer a kind: unknown image 404s are
// not found, refused credentials permission, an unreachable registry
// unavailable.
func registryError(err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusNotFound:
			return fmt.Errorf("%v: %w", err, errdefs.ErrNotFound)
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("%v (credentials come from the Docker config: docker login, or $DOCKER_CONFIG): %w", err, errdefs.ErrPermission)
		case http.StatusTooManyRequests:
			return fmt.Errorf("%v: %w", err, errdefs.ErrLimit)
		}
		return fmt.Errorf("%v: %w", err, errdefs.ErrUnavailable)
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, errUnexpectedEOF) {
		return fmt.Errorf("%v: %w", err, errdefs.ErrUnavailable)
	}
	for _, k := range []error{errdefs.ErrInvalid, errdefs.ErrNotFound, errdefs.ErrLimit, errdefs.ErrPermission, errdefs.ErrUnavailable, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, k) {
			return err
		}
	}
	return fmt.Errorf("%v: %w", err, errdefs.ErrUnavailable)
}
