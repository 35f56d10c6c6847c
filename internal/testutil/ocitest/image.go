package ocitest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// Image is a one-layer image as a docker-archive tarball, the format both
// `ctr images import` and `docker load` take: no registry is reachable.
type Image struct {
	Name  string   // the repo tag, e.g. airlock.test/busybox:1
	Layer string   // a tar of the root filesystem
	Cmd   []string // the image's default command
	Env   []string // its environment (PATH)
}

// Write writes the archive to out.
func (im Image) Write(out string) error {
	sum, size, err := fileDigest(im.Layer)
	if err != nil {
		return fmt.Errorf("image %s: %w", im.Name, err)
	}
	cfg, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux", "created": "1970-01-01T00:00:00Z",
		"config": map[string]any{"Env": im.Env, "Cmd": im.Cmd, "WorkingDir": "/"},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + sum}},
	})
	csum := sha256.Sum256(cfg)
	cfgName := hex.EncodeToString(csum[:]) + ".json"
	manifest, _ := json.Marshal([]map[string]any{{
		"Config": cfgName, "RepoTags": []string{im.Name}, "Layers": []string{"layer/layer.tar"},
	}})
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("image %s: %w", im.Name, err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	mod := time.Unix(0, 0)
	if err := tw.WriteHeader(&tar.Header{Name: "layer/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mod}); err != nil {
		return err
	}
	layer, err := os.Open(im.Layer)
	if err != nil {
		return err
	}
	defer layer.Close()
	if err := addFile(tw, "layer/layer.tar", layer, size); err != nil {
		return fmt.Errorf("image %s: %w", im.Name, err)
	}
	if err := addFile(tw, cfgName, bytes.NewReader(cfg), int64(len(cfg))); err != nil {
		return err
	}
	if err := addFile(tw, "manifest.json", bytes.NewReader(manifest), int64(len(manifest))); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

func addFile(tw *tar.Writer, name string, r io.Reader, size int64) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size, ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	_, err := io.Copy(tw, r)
	return err
}

func fileDigest(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// BusyboxLayer writes to out a root filesystem of Debian's static busybox
// (bb, /bin/busybox) with its applets as links, /etc/passwd, and the
// usual top-level directories.
func BusyboxLayer(bb, out string) error {
	bin, err := os.ReadFile(bb)
	if err != nil {
		return fmt.Errorf("busybox layer: %w", err)
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	mod := time.Unix(0, 0)
	hdr := func(h *tar.Header) {
		h.ModTime = mod
		if err == nil {
			err = tw.WriteHeader(h)
		}
	}
	for _, d := range []string{"bin", "etc", "tmp", "proc", "sys", "dev", "root", "work"} {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		hdr(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: mode})
	}
	hdr(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin))})
	if err == nil {
		_, err = tw.Write(bin)
	}
	for _, a := range []string{"sh", "cat", "echo", "ls", "sleep", "id", "true", "grep", "mount", "touch", "mknod", "chmod", "nsenter", "unshare", "hostname", "wc", "head", "ps", "kill", "tty", "test"} {
		hdr(&tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox"})
	}
	passwd := []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n")
	hdr(&tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(passwd))})
	if err == nil {
		_, err = tw.Write(passwd)
	}
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		return fmt.Errorf("busybox layer: %w", err)
	}
	return os.WriteFile(out, layer.Bytes(), 0o644)
}
