package images

import (
	"strings"
	"time"
)

// Image is one image in the store.
type Image struct {
	// ID is the digest of the image's config ("sha256:..."), as Docker
	// names images.
	ID string `json:"id"`
	// Digest is the digest of its manifest as stored.
	Digest string `json:"digest"`
	// Names are the references that name it (normalised, e.g.
	// "index.docker.io/library/debian:bookworm").
	Names []string `json:"names,omitempty"`
	// Repo digests this image was pulled by ("REPO@sha256:...").
	RepoDigests []string  `json:"repo_digests,omitempty"`
	Created     time.Time `json:"created,omitzero"` // from the image config
	Added       time.Time `json:"added"`            // when it entered the store
	Platform    string    `json:"platform,omitempty"`
	// Size is the sum of the layers' compressed sizes; Unpacked their
	// unpacked bytes.
	Size     int64   `json:"size"`
	Unpacked int64   `json:"unpacked"`
	Config   Config  `json:"config"`
	Layers   []Layer `json:"layers"`
	// ManifestType is the manifest's media type.
	ManifestType string `json:"manifest_type"`
	// Cache marks a build step's result kept for later builds: not
	// listed, removed by Prune(all).
	Cache bool `json:"cache,omitempty"`
}

// Layer is one layer of an image, lowest first.
type Layer struct {
	DiffID    string `json:"diff_id"` // digest of the uncompressed tar
	Digest    string `json:"digest"`  // digest of the blob as stored
	MediaType string `json:"media_type"`
	Size      int64  `json:"size"` // compressed size
}

// Config is what the image's config says about running it.
type Config struct {
	Env        []string          `json:"env,omitempty"`
	User       string            `json:"user,omitempty"`
	WorkingDir string            `json:"working_dir,omitempty"`
	Entrypoint []string          `json:"entrypoint,omitempty"`
	Cmd        []string          `json:"cmd,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	StopSignal string            `json:"stop_signal,omitempty"`
}

// Argv is the command the image runs when the caller gives args (nil: the
// image's Cmd): Entrypoint followed by args or Cmd, as Docker does.
func (c Config) Argv(args []string) []string {
	if len(args) == 0 {
		args = c.Cmd
	}
	return append(append([]string{}, c.Entrypoint...), args...)
}

// ShortID is the first 12 hex digits of the image ID.
func (im *Image) ShortID() string {
	h := strings.TrimPrefix(im.ID, "sha256:")
	if len(h) > 12 {
		h = h[:12]
	}
	return h
}

// Progress is one report of a pull, import or build in progress.
type Progress struct {
	Layer string // layer digest ("" for the image as a whole)
	Phase string // "download", "unpack", "exists", "done"
	Done  int64  // bytes so far
	Total int64  // bytes in all (0: unknown)
}

// Progress phases.
const (
	PhaseDownload = "download"
	PhaseUnpack   = "unpack"
	PhaseExists   = "exists"
	PhaseDone     = "done"
)

// PruneReport says what Prune removed.
type PruneReport struct {
	Images []string `json:"images,omitempty"` // IDs of removed images
	Layers int      `json:"layers"`           // unpacked layer directories removed
	Blobs  int      `json:"blobs"`            // blobs removed
	Bytes  int64    `json:"bytes"`            // disk space given back (approximate)
}
