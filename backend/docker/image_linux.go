package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/sandbox"
)

// BaseImage is the empty image a sandbox without an image runs on: the
// host's system directories are bound over it as the policy lists them.
// The backend imports it into the daemon on first use.
const BaseImage = "airlock/base:1"

// resolved is an image ready to run: its ID and the parts of its config
// the backend honours.
type resolved struct {
	ID   string
	Env  []string // the image's ENV, lowest layer of the sandbox's environment
	Host bool     // the base image: the host's system dirs are bound over it
}

// resolveImage is the one place that turns Spec.Image into an image of the
// daemon: "" is the base image (host system dirs); a name airlock's image
// store holds is that image, loaded into the daemon on first use (so one
// name means the same image on every backend); anything else an image the
// daemon already has (by name or ID). Nothing is pulled.
func (b *Backend) resolveImage(ctx context.Context, e *engine, ref string) (resolved, error) {
	if ref == "" {
		id, err := b.baseImage(ctx, e)
		return resolved{ID: id, Host: true}, err
	}
	if strings.ContainsAny(ref, "\x00\n") || len(ref) > 512 {
		return resolved{}, fmt.Errorf("image %q: not an image reference: %w", ref, sandbox.ErrInvalid)
	}
	if b.cfg.Images != nil {
		img, im, err := b.cfg.Images.V1Image(ctx, ref)
		switch {
		case err == nil:
			if err := b.loadImage(ctx, e, img, im); err != nil {
				return resolved{}, fmt.Errorf("image %q: %w", ref, err)
			}
			ref = im.ID
		case !errors.Is(err, sandbox.ErrNotFound):
			return resolved{}, fmt.Errorf("image %q: image store: %w", ref, err)
		}
	}
	ins, err := e.ImageInspect(ctx, ref)
	if err != nil {
		if notFound(err) {
			return resolved{}, fmt.Errorf("image %q: not in the docker daemon (load or import it first; nothing is pulled): %w", ref, sandbox.ErrNotFound)
		}
		return resolved{}, fmt.Errorf("image %q: %v: %w", ref, err, sandbox.ErrUnavailable)
	}
	r := resolved{ID: ins.ID}
	if ins.Config != nil {
		r.Env = ins.Config.Env
	}
	return r, nil
}

// loadImage loads a stored image into the daemon unless it has it (by ID,
// the config's digest): untagged, so that no name of the daemon's own
// changes meaning; the backend runs it by ID.
func (b *Backend) loadImage(ctx context.Context, e *engine, img v1.Image, im *images.Image) error {
	if _, err := e.ImageInspect(ctx, im.ID); err == nil {
		return nil
	}
	b.loadMu.Lock()
	defer b.loadMu.Unlock()
	if _, err := e.ImageInspect(ctx, im.ID); err == nil {
		return nil
	}
	d, err := name.NewDigest("airlock.invalid/store@" + im.Digest)
	if err != nil {
		return fmt.Errorf("load into the daemon: %v: %w", err, sandbox.ErrInvalid)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarball.MultiRefWrite(map[name.Reference]v1.Image{d: img}, pw)) }()
	defer pr.Close()
	t0 := time.Now()
	rc, err := e.ImageLoad(ctx, pr)
	if err != nil {
		return fmt.Errorf("load into the daemon: %v: %w", err, sandbox.ErrUnavailable)
	}
	defer rc.Close()
	if err := readProgress(rc); err != nil {
		return fmt.Errorf("load into the daemon: %w", err)
	}
	if _, err := e.ImageInspect(ctx, im.ID); err != nil {
		return fmt.Errorf("load into the daemon: the daemon does not show %s after loading it: %v: %w", im.ID, err, sandbox.ErrUnavailable)
	}
	b.log.Info("loaded an image of the store into the daemon", "id", im.ID, "names", im.Names, "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// baseImage returns the ID of BaseImage, importing it when missing.
func (b *Backend) baseImage(ctx context.Context, e *engine) (string, error) {
	if ins, err := e.ImageInspect(ctx, BaseImage); err == nil {
		return ins.ID, nil
	}
	b.baseOnce.Lock()
	defer b.baseOnce.Unlock()
	if ins, err := e.ImageInspect(ctx, BaseImage); err == nil {
		return ins.ID, nil
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"proc/", "dev/", "sys/", "tmp/", ".airlock/"} {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: mode}); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	id, err := b.Import(ctx, &buf, BaseImage, []string{"LABEL " + LabelBackend + "=" + Name})
	if err != nil {
		return "", fmt.Errorf("base image: %w", err)
	}
	b.log.Info("imported the base image", "image", BaseImage, "id", id)
	return id, nil
}

// Import loads a root filesystem tarball into the daemon as image ref
// (Engine API image import; changes are Dockerfile instructions such as
// "ENV K=V"), and returns the image's ID.
func (b *Backend) Import(ctx context.Context, rootfs io.Reader, ref string, changes []string) (string, error) {
	e, err := b.engine()
	if err != nil {
		return "", err
	}
	rc, err := e.ImageImport(ctx, rootfs, ref, changes)
	if err != nil {
		return "", fmt.Errorf("import image %q: %v: %w", ref, err, sandbox.ErrUnavailable)
	}
	defer rc.Close()
	if err := readProgress(rc); err != nil {
		return "", fmt.Errorf("import image %q: %w", ref, err)
	}
	ins, err := e.ImageInspect(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("import image %q: inspect: %v: %w", ref, err, sandbox.ErrUnavailable)
	}
	return ins.ID, nil
}

// readProgress drains the daemon's JSON progress stream and returns the
// error it reports, if any.
func readProgress(r io.Reader) error {
	dec := json.NewDecoder(io.LimitReader(r, 16<<20))
	for {
		var m struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("progress stream: %v: %w", err, sandbox.ErrUnavailable)
		}
		if m.Error != "" || m.ErrorDetail.Message != "" {
			return fmt.Errorf("daemon: %s%s: %w", m.Error, m.ErrorDetail.Message, sandbox.ErrInvalid)
		}
	}
}
