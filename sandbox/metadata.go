package sandbox

import (
	"context"
	"fmt"
	"strings"
)

// File metadata is user-defined key/value text kept on a regular file or
// directory as extended attributes named MetadataXattrPrefix+key (E2B's
// file metadata: its envd keeps it under the same names). The prefix is
// added by the side that touches the file, never taken from a caller, so
// a caller can only ever reach that one corner of the "user." namespace:
// never "security.", "trusted." or "system." attributes.
const (
	// MetadataXattrPrefix names every metadata attribute.
	MetadataXattrPrefix = "user.e2b."
	// MaxMetadataKey bounds a key: the kernel's 255-byte attribute name
	// less the prefix.
	MaxMetadataKey = 255 - len(MetadataXattrPrefix)
	// MaxMetadataBytes bounds one file's metadata: keys with the prefix
	// plus values (E2B's bound, within an ext4 inode's attribute budget).
	MaxMetadataBytes = 4096
	// MaxMetadataEntries bounds the number of keys on one file.
	MaxMetadataEntries = 128
)

// MetadataFiles is a Files whose backend keeps file metadata. Backends
// that cannot (no extended attributes) do not implement it; callers
// answer ErrNotSupported. Stat and List report metadata in
// FileInfo.Metadata where it is implemented.
type MetadataFiles interface {
	Files
	// SetMetadata replaces all metadata of the regular file or directory
	// at path (a final symlink is not followed) with m: keys absent from m
	// are removed, an empty m clears it. m must pass CheckMetadata. Safe
	// for concurrent use; not atomic against a concurrent SetMetadata.
	SetMetadata(ctx context.Context, path string, m map[string]string) error
}

// ValidMetadataKey reports whether k may be a metadata key: 1 to
// MaxMetadataKey bytes of HTTP token characters (E2B carries keys as
// header names).
func ValidMetadataKey(k string) bool {
	if k == "" || len(k) > MaxMetadataKey {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// ValidMetadataValue reports whether v may be a metadata value: printable
// US-ASCII (0x20-0x7e), as an HTTP header value carries it.
func ValidMetadataValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return len(v) <= MaxMetadataBytes
}

// CheckMetadata checks a whole metadata map against the key and value
// rules and the count and size bounds; the error wraps ErrInvalid (bad
// input, whichever rule it breaks).
func CheckMetadata(m map[string]string) error {
	if len(m) > MaxMetadataEntries {
		return fmt.Errorf("file metadata: %d keys, at most %d: %w", len(m), MaxMetadataEntries, ErrInvalid)
	}
	total := 0
	for k, v := range m {
		if !ValidMetadataKey(k) {
			return fmt.Errorf("file metadata: key %.64q: want 1-%d letters, digits or !#$%%&'*+-.^_`|~: %w", k, MaxMetadataKey, ErrInvalid)
		}
		if !ValidMetadataValue(v) {
			return fmt.Errorf("file metadata: value of %q: want printable US-ASCII (0x20-0x7e): %w", k, ErrInvalid)
		}
		total += len(MetadataXattrPrefix) + len(k) + len(v)
	}
	if total > MaxMetadataBytes {
		return fmt.Errorf("file metadata: %d bytes (keys with the %q prefix, values), at most %d: %w", total, MetadataXattrPrefix, MaxMetadataBytes, ErrInvalid)
	}
	return nil
}
