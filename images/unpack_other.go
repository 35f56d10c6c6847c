//go:build !linux

package images

import "io"

type unpackOptions struct {
	keepSetID, chown bool
	limit            int64
}

type unpackResult struct {
	Bytes    int64    `json:"bytes"`
	Entries  int      `json:"entries"`
	Skipped  []string `json:"skipped,omitempty"`
	NSkipped int      `json:"n_skipped,omitempty"`
	Stripped int      `json:"stripped_setid,omitempty"`
}

func unpackLayer(io.Reader, string, unpackOptions) (string, *unpackResult, error) {
	return "", nil, errPlatform
}

func removeTree(string) error { return errPlatform }
