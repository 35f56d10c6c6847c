package api

import "time"

// Image is an image of the server's image store (GET /v1/images/{ref}).
type Image struct {
	ID          string      `json:"id"`     // config digest, "sha256:..."
	Digest      string      `json:"digest"` // manifest digest
	Names       []string    `json:"names,omitempty"`
	RepoDigests []string    `json:"repo_digests,omitempty"`
	Created     time.Time   `json:"created,omitzero"`
	Added       time.Time   `json:"added"`
	Platform    string      `json:"platform,omitempty"`
	Size        int64       `json:"size"`     // compressed layers
	Unpacked    int64       `json:"unpacked"` // unpacked layers
	Config      ImageConfig `json:"config"`
	Layers      []string    `json:"layers"` // layer digests, lowest first
}

// ImageConfig is what an image's config says about running it.
type ImageConfig struct {
	Env        []string          `json:"env,omitempty"`
	User       string            `json:"user,omitempty"`
	WorkingDir string            `json:"working_dir,omitempty"`
	Entrypoint []string          `json:"entrypoint,omitempty"`
	Cmd        []string          `json:"cmd,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
}

// ImageList is the answer of GET /v1/images and POST /v1/images/import.
type ImageList struct {
	Images []Image `json:"images"`
}

// PullImageRequest is the body of POST /v1/images/pull.
type PullImageRequest struct {
	Ref string `json:"ref"`
	// Platform of a multi-platform image ("linux/arm64"); default the
	// server's.
	Platform string `json:"platform,omitempty"`
}

// PruneImagesRequest is the body of POST /v1/images/prune.
type PruneImagesRequest struct {
	// All removes every image no sandbox uses, named ones too.
	All bool `json:"all,omitempty"`
}

// PruneImagesResult says what a prune removed.
type PruneImagesResult struct {
	Images []string `json:"images,omitempty"` // IDs
	Layers int      `json:"layers"`
	Blobs  int      `json:"blobs"`
	Bytes  int64    `json:"bytes"`
}
