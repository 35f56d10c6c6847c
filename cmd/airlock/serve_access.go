package main

import (
	"fmt"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// previewScheme is the scheme of preview URLs: https when the server
// itself serves TLS (a proxy in front that terminates TLS is not seen).
func previewScheme(tlsCert string) string {
	if tlsCert != "" {
		return "https"
	}
	return "http"
}

// volumeQuotaFlag parses --volume-quota.
func volumeQuotaFlag(v string) (int64, error) {
	n, err := policy.ParseByteSize(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("--volume-quota %q: want a size such as 16Gi: %w", v, sandbox.ErrInvalid)
	}
	return int64(n), nil
}
