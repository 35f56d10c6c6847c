//go:build !linux

package build

import (
	"github.com/google/go-containerregistry/pkg/v1"

	"github.com/airlock-dev/airlock/errdefs"
)

func upperLayer(string, string, []string) (v1.Layer, int, error) {
	return nil, 0, errdefs.ErrNotSupported
}
