package server

import (
	"bytes"
	"compress/gzip"
	"errors"
	"testing"

	"github.com/airlock-dev/airlock/errdefs"
)

// A gzip upload is limited by its uncompressed size too: a small body
// must not expand into more than the upload limit on the server's disk.
func TestSpoolArchiveGzipLimit(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(make([]byte, 1<<20))
	zw.Close()
	var out bytes.Buffer
	if err := spoolArchive(&out, bytes.NewReader(gz.Bytes()), 64<<10); !errors.Is(err, errdefs.ErrLimit) {
		t.Fatalf("1 MiB uncompressed over a 64 KiB limit: %v (%d bytes spooled)", err, out.Len())
	}
	out.Reset()
	if err := spoolArchive(&out, bytes.NewReader(gz.Bytes()), 2<<20); err != nil || out.Len() != 1<<20 {
		t.Fatalf("within the limit: %v, %d bytes", err, out.Len())
	}
	if err := spoolArchive(&out, bytes.NewReader([]byte{0x1f, 0x8b, 1, 2, 3}), 1<<20); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("broken gzip: %v", err)
	}
}
