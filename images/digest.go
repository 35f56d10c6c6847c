package images

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
)

// digester computes an OCI "sha256:..." digest of what is written to it.
type digester struct{ h hash.Hash }

func newDigester() *digester { return &digester{h: sha256.New()} }

func (d *digester) Write(p []byte) (int, error) { return d.h.Write(p) }

func (d *digester) digest() string { return "sha256:" + hex.EncodeToString(d.h.Sum(nil)) }

// validDigest reports whether s is "sha256:" and 64 lowercase hex digits:
// digests become file names, so nothing else may pass.
func validDigest(s string) bool {
	const p = "sha256:"
	if len(s) != len(p)+64 || s[:len(p)] != p {
		return false
	}
	for i := len(p); i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

var errUnexpectedEOF = io.ErrUnexpectedEOF
