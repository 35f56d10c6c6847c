package ocirt

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/internal/testutil/ocitest"
)

// testImage is the name of the image the tests build from Debian's static
// busybox (no registry is reachable): a docker-archive tarball that both
// `ctr images import` and `docker load` take.
const testImage = "airlock.test/busybox:1"

// buildImage writes the image tarball into dir and returns its path.
func buildImage(t testing.TB, dir string) string {
	t.Helper()
	bb := "/bin/busybox"
	if _, err := os.Stat(bb); err != nil {
		testutil.Skip(t, "busybox-static not installed (/bin/busybox)")
	}
	layer := filepath.Join(dir, "layer.tar")
	must(t, ocitest.BusyboxLayer(bb, layer))
	out := filepath.Join(dir, "image.tar")
	must(t, ocitest.Image{
		Name: testImage, Layer: layer, Env: []string{"PATH=/bin"},
		// The pause container of the pods: waits, and ends on TERM.
		Cmd: []string{"sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"},
	}.Write(out))
	return out
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
