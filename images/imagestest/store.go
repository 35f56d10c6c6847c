package imagestest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1"

	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

var (
	storeMu sync.Mutex
	shared  *images.Store
	holders atomic.Int64
)

// SharedStore is the test image store kept between runs on this machine
// (CacheDir()/store) when this user can write there, so that the Debian
// image is unpacked once per machine; else a store in a temp dir of t.
func SharedStore(t testing.TB) *images.Store {
	t.Helper()
	storeMu.Lock()
	defer storeMu.Unlock()
	if shared != nil {
		return shared
	}
	dir := filepath.Join(CacheDir(), "store")
	if os.MkdirAll(CacheDir(), 0o755) == nil {
		if s, err := images.Open(dir, images.Options{}); err == nil {
			shared = s
			return s
		}
	}
	s, err := images.Open(filepath.Join(t.TempDir(), "store"), images.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Hold makes sure the store has img as name and holds it for the rest of
// the test (released at its end).
func Hold(t testing.TB, s *images.Store, name string, img func(testing.TB) v1.Image) *images.Rootfs {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Inspect(ctx, name); err != nil {
		if _, err := s.AddImage(ctx, img(t), images.AddOptions{Names: []string{name}}); err != nil {
			t.Fatal(err)
		}
	}
	holder := fmt.Sprintf("test-%d-%d-%s", os.Getpid(), holders.Add(1), strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
	if len(holder) > 180 {
		holder = holder[:180]
	}
	r, err := s.Acquire(ctx, name, holder, images.AcquireOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Release)
	return r
}

// BusyboxRoot holds the busybox image ("airlock-test/busybox:1") of the
// shared store.
func BusyboxRoot(t testing.TB) *images.Rootfs {
	t.Helper()
	BusyboxTar(t) // skip early when there is no busybox
	return Hold(t, SharedStore(t), "airlock-test/busybox:1", Busybox)
}

// DebianRoot holds the Debian image ("airlock-test/debian:bookworm").
func DebianRoot(t testing.TB) *images.Rootfs {
	t.Helper()
	DebianTarball(t)
	return Hold(t, SharedStore(t), "airlock-test/debian:bookworm", Debian)
}

// DebianPythonRoot holds the Debian image with python3, pip and CPython's
// test suite ("airlock-test/debian-python:bookworm").
func DebianPythonRoot(t testing.TB) *images.Rootfs {
	t.Helper()
	DebianPythonTarball(t)
	return Hold(t, SharedStore(t), "airlock-test/debian-python:bookworm", DebianPython)
}

// Spec makes an image sandbox's policy and spec: base (an unresolved
// policy, e.g. a profile) with the image's config applied, workspace ws
// ("" for none), resolved for the calling user.
func Spec(t testing.TB, r *images.Rootfs, base *policy.Policy, ws string) sandbox.Spec {
	t.Helper()
	p := base.Clone()
	if ws == "" {
		p.Filesystem.Workspace = "none"
	} else {
		p.Filesystem.Workspace = ws
	}
	p.Limits.Timeout = 0
	if err := r.Apply(p); err != nil {
		t.Fatal(err)
	}
	cwd := ws
	if cwd == "" {
		cwd = "/"
	}
	res, err := p.Resolve(policy.ResolveEnv{Cwd: cwd, Home: "/root", Environ: []string{"PATH=/host/bin", "HOME=/root", "LANG=C.UTF-8"}, UID: os.Getuid(), GID: os.Getgid()})
	if err != nil {
		t.Fatal(err)
	}
	return sandbox.Spec{Policy: res, Image: p.Filesystem.Image, Root: &sandbox.ImageRoot{Layers: r.Layers}}
}
