package images

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzUnpack feeds arbitrary bytes to the layer unpacker: whatever it
// accepts or refuses, nothing may appear outside the layer's directory.
func FuzzUnpack(f *testing.F) {
	seed := func(hs ...*tar.Header) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, h := range hs {
			tw.WriteHeader(h)
			if h.Typeflag == tar.TypeReg {
				tw.Write(make([]byte, h.Size))
			}
		}
		tw.Close()
		return b.Bytes()
	}
	f.Add(seed(&tar.Header{Name: "a/b", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}))
	f.Add(seed(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/"}, &tar.Header{Name: "l/x", Typeflag: tar.TypeReg}))
	f.Add(seed(&tar.Header{Name: "../x", Typeflag: tar.TypeReg}))
	f.Add(seed(&tar.Header{Name: "d/.wh..wh..opq", Typeflag: tar.TypeReg}, &tar.Header{Name: ".wh.d", Typeflag: tar.TypeReg}))
	f.Add(seed(&tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "../../etc/passwd"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		base := t.TempDir()
		dir := filepath.Join(base, "layer")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		unpackLayer(bytes.NewReader(data), dir, unpackOptions{limit: 1 << 20})
		ents, _ := os.ReadDir(base)
		for _, e := range ents {
			if e.Name() != "layer" {
				t.Fatalf("unpack wrote %s outside the layer", e.Name())
			}
		}
		filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode()&os.ModeDevice != 0 && !strings.HasPrefix(p, dir) {
				t.Fatalf("device outside: %s", p)
			}
			return nil
		})
	})
}
