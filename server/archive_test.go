package server

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/sandbox"
)

// A gzip upload is limited by its uncompressed size too: a small body
// must not expand into more than the upload limit on the server's disk.
func TestSpoolArchiveGzipLimit(t *testing.T) {
	t.Parallel()
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

// An upload that fails while extracting (here: a file entry where the
// sandbox has a directory, which validation cannot know) removes the files
// it created; files it replaced stay replaced, each write being whole.
func TestArchiveFailedExtractionRemovesWhatItCreated(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Mkdir(ctx, sb.ID, "/dst/taken", 0o755, true); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteFile(ctx, sb.ID, "/dst/kept.txt", strings.NewReader("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range []struct{ name, data string }{
		{"new.txt", "new"}, {"sub/", ""}, {"sub/inner.txt", "inner"}, {"kept.txt", "replaced"}, {"taken", "x"},
	} {
		h := &tar.Header{Name: e.name, Typeflag: tar.TypeReg, Size: int64(len(e.data)), Mode: 0o644}
		if strings.HasSuffix(e.name, "/") {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.data)
	}
	tw.Close()
	err = c.Upload(ctx, sb.ID, "/dst", &b)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 400 {
		t.Fatalf("a file over a directory: want 400, got %v", err)
	}
	for _, p := range []string{"/dst/new.txt", "/dst/sub/inner.txt"} {
		if _, err := c.Stat(ctx, sb.ID, p); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("%s: created by the failed upload, still there (%v)", p, err)
		}
	}
	rc, err := c.ReadFile(ctx, sb.ID, "/dst/kept.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if got, _ := io.ReadAll(rc); string(got) != "replaced" {
		t.Errorf("/dst/kept.txt: %q, want the replaced content", got)
	}
}
