package ui

import (
	"bytes"
	"compress/gzip"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// TestBundleIsFresh builds the console from its sources and lock file
// and compares with the committed dist/: a change to src/ without
// `npm run build` (or a hand edit of dist/) fails here.
func TestBundleIsFresh(t *testing.T) {
	node := testutil.RequireBinary(t, "node")
	if _, err := os.Stat("node_modules/esbuild"); err != nil {
		testutil.Skip(t, "ui/node_modules missing: run npm ci in ui/ (scripts/deps.sh does)")
	}
	out := t.TempDir()
	if b, err := exec.Command(node, "build.mjs", out).CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, b)
	}
	for _, name := range []string{"index.html", "app.js", "app.css"} {
		fresh, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		committed, err := fs.ReadFile(Dist(), name)
		if err != nil {
			t.Fatalf("dist/%s is not committed: %v", name, err)
		}
		if !bytes.Equal(fresh, committed) {
			t.Errorf("dist/%s differs from a fresh build: run `npm run build` in ui/ and commit dist/", name)
		}
	}
}

// TestFirstLoadSize: what a browser fetches to show the console (the
// page, script and stylesheet), gzip-compressed, stays under 250 KB.
func TestFirstLoadSize(t *testing.T) {
	total := 0
	for _, name := range []string{"index.html", "app.js", "app.css"} {
		b, err := fs.ReadFile(Dist(), name)
		if err != nil {
			t.Fatal(err)
		}
		var z bytes.Buffer
		w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
		w.Write(b)
		w.Close()
		total += z.Len()
	}
	t.Logf("first load: %d bytes gzip-compressed", total)
	if total > 250<<10 {
		t.Errorf("first load is %d bytes compressed, over the 250 KB budget", total)
	}
}
