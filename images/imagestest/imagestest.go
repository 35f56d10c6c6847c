// Package imagestest makes real images for tests, here and now: a busybox
// image from the host's static busybox (Debian's busybox-static), a
// Debian image from the tarball scripts/test-images.sh builds with
// mmdebstrap, layers with any entries (hostile ones included), and
// go-containerregistry's in-process registry to pull them from. It must
// never be imported outside tests.
package imagestest

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// Entry is one tar entry of a test layer.
type Entry struct {
	Name     string
	Type     byte // tar.TypeReg when 0
	Mode     int64
	Data     string
	Link     string // symlink or hard link target
	UID, GID int
	Major    int64
	Minor    int64
	Xattrs   map[string]string
}

// Tar returns the tar archive of entries, in order.
func Tar(t testing.TB, entries ...Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.Name, Typeflag: e.Type, Mode: e.Mode, Uid: e.UID, Gid: e.GID, Linkname: e.Link,
			Devmajor: e.Major, Devminor: e.Minor, ModTime: time.Unix(1700000000, 0), Format: tar.FormatPAX}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if h.Typeflag == tar.TypeDir {
				h.Mode = 0o755
			}
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.Data))
		}
		for k, v := range e.Xattrs {
			if h.PAXRecords == nil {
				h.PAXRecords = map[string]string{}
			}
			h.PAXRecords["SCHILY.xattr."+k] = v
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.Data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Layer is a gzip layer of the tar b.
func Layer(t testing.TB, b []byte) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Image stacks layers (lowest first) into a linux image of this machine's
// architecture with cfg as its run config.
func Image(t testing.TB, cfg v1.Config, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: time.Unix(1700000000, 0).UTC()}
	cf.Config = cfg
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// Passwd and Group are the busybox image's users: root, a normal user
// 1000 (user) and nobody.
const (
	Passwd = "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
	Group  = "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n"
)

var (
	bbOnce sync.Once
	bbTar  []byte
	bbErr  string
)

// BusyboxTar is the root filesystem of the busybox image as a tar: the
// host's static busybox (Debian's busybox-static, installed by
// scripts/deps.sh) at /bin/busybox with a link per applet, /etc/passwd
// and /etc/group, /root, /home/user (1000), /tmp.
func BusyboxTar(t testing.TB) []byte {
	t.Helper()
	testutil.RequireLinux(t)
	bbOnce.Do(func() { bbTar, bbErr = makeBusybox() })
	if bbErr != "" {
		testutil.Skip(t, bbErr)
	}
	return bbTar
}

func makeBusybox() ([]byte, string) {
	bin := "/bin/busybox"
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, "busybox-static not installed (" + bin + ")"
	}
	if out, err := exec.Command("file", "-L", bin).Output(); err == nil && !strings.Contains(string(out), "statically linked") {
		return nil, bin + " is not static (install busybox-static)"
	}
	list, err := exec.Command(bin, "--list").Output()
	if err != nil {
		return nil, "busybox --list: " + err.Error()
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mt := time.Unix(1700000000, 0)
	dir := func(n string, mode int64, uid int) {
		tw.WriteHeader(&tar.Header{Name: n + "/", Typeflag: tar.TypeDir, Mode: mode, Uid: uid, Gid: uid, ModTime: mt})
	}
	file := func(n string, mode int64, b []byte) {
		tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(b)), ModTime: mt})
		tw.Write(b)
	}
	for _, d := range []string{"bin", "etc", "usr", "usr/bin", "var", "proc", "dev", "sys"} {
		dir(d, 0o755, 0)
	}
	dir("root", 0o700, 0)
	dir("home", 0o755, 0)
	dir("home/user", 0o755, 1000)
	dir("tmp", 0o1777, 0)
	file("bin/busybox", 0o755, data)
	for _, a := range strings.Fields(string(list)) {
		if a == "busybox" || strings.ContainsAny(a, "/.") {
			continue
		}
		tw.WriteHeader(&tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777, ModTime: mt})
	}
	file("etc/passwd", 0o644, []byte(Passwd))
	file("etc/group", 0o644, []byte(Group))
	file("etc/hostname", 0o644, []byte("busybox\n"))
	if err := tw.Close(); err != nil {
		return nil, err.Error()
	}
	return buf.Bytes(), ""
}

// BusyboxConfig is the busybox image's run config.
var BusyboxConfig = v1.Config{
	Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "IMAGE_VAR=from-image"},
	Cmd: []string{"sh"},
}

// Busybox is the busybox image (one layer).
func Busybox(t testing.TB) v1.Image {
	t.Helper()
	return Image(t, BusyboxConfig, Layer(t, BusyboxTar(t)))
}

// DebianTarball is the path of the Debian root filesystem tarball
// scripts/test-images.sh builds (mmdebstrap, minbase, bookworm):
// $AIRLOCK_TEST_DEBIAN, else its cache path. Missing: skip (fail in CI).
func DebianTarball(t testing.TB) string {
	t.Helper()
	return debianTarball(t, "AIRLOCK_TEST_DEBIAN", "minbase")
}

// DebianPythonTarball is the path of the Debian image with python3, pip
// and CPython's own test suite (scripts/test-images.sh python), or
// $AIRLOCK_TEST_DEBIAN_PYTHON; it skips t when there is none.
func DebianPythonTarball(t testing.TB) string {
	t.Helper()
	return debianTarball(t, "AIRLOCK_TEST_DEBIAN_PYTHON", "python")
}

func debianTarball(t testing.TB, env, variant string) string {
	p := os.Getenv(env)
	if p == "" {
		p = filepath.Join(CacheDir(), "debian-bookworm-"+variant+".tar")
	}
	if _, err := os.Stat(p); err != nil {
		testutil.Skip(t, "no Debian test image at "+p+" (scripts/test-images.sh builds it)")
	}
	return p
}

// CacheDir is where scripts/test-images.sh keeps what it builds.
func CacheDir() string {
	if d := os.Getenv("AIRLOCK_TEST_IMAGES"); d != "" {
		return d
	}
	return "/var/cache/airlock-test-images"
}

// Debian is the Debian image: the tarball as one layer.
func Debian(t testing.TB) v1.Image {
	t.Helper()
	return debianImage(t, DebianTarball(t))
}

// DebianPython is the Debian image with python3, pip and CPython's tests.
func DebianPython(t testing.TB) v1.Image {
	t.Helper()
	return debianImage(t, DebianPythonTarball(t))
}

func debianImage(t testing.TB, p string) v1.Image {
	l, err := tarball.LayerFromFile(p, tarball.WithCompressionLevel(1))
	if err != nil {
		t.Fatal(err)
	}
	return Image(t, v1.Config{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, Cmd: []string{"bash"}}, l)
}
