package ocirt

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil"
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
	bin, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	mod := time.Unix(0, 0)
	dirs := []string{"bin", "etc", "tmp", "proc", "sys", "dev", "root", "work"}
	for _, d := range dirs {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		must(t, tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: mode, ModTime: mod}))
	}
	must(t, tw.WriteHeader(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin)), ModTime: mod}))
	_, err = tw.Write(bin)
	must(t, err)
	for _, a := range []string{"sh", "cat", "echo", "ls", "sleep", "id", "true", "grep", "mount", "touch", "mknod", "chmod", "nsenter", "unshare", "hostname", "wc", "head", "ps", "kill", "tty", "test"} {
		must(t, tw.WriteHeader(&tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox", ModTime: mod}))
	}
	passwd := []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n")
	must(t, tw.WriteHeader(&tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(passwd)), ModTime: mod}))
	_, err = tw.Write(passwd)
	must(t, err)
	must(t, tw.Close())
	sum := sha256.Sum256(layer.Bytes())
	diffID := "sha256:" + hex.EncodeToString(sum[:])
	cfg, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux", "created": "1970-01-01T00:00:00Z",
		"config": map[string]any{
			"Env": []string{"PATH=/bin"},
			// The pause container of the pods: waits, and ends on TERM.
			"Cmd":        []string{"sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"},
			"WorkingDir": "/",
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	})
	csum := sha256.Sum256(cfg)
	cfgName := hex.EncodeToString(csum[:]) + ".json"
	manifest, _ := json.Marshal([]map[string]any{{
		"Config": cfgName, "RepoTags": []string{testImage}, "Layers": []string{"layer/layer.tar"},
	}})
	out := filepath.Join(dir, "image.tar")
	f, err := os.Create(out)
	must(t, err)
	defer f.Close()
	iw := tar.NewWriter(f)
	add := func(name string, data []byte) {
		must(t, iw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data)), ModTime: mod}))
		_, err := iw.Write(data)
		must(t, err)
	}
	must(t, iw.WriteHeader(&tar.Header{Name: "layer/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mod}))
	add("layer/layer.tar", layer.Bytes())
	add(cfgName, cfg)
	add("manifest.json", manifest)
	must(t, iw.Close())
	return out
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
