package build

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/airlock-dev/airlock/errdefs"
)

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}

// dirsLayer is a layer of directories (0755, root), top down.
func dirsLayer(dirs []string) (v1.Layer, error) {
	var buf strings.Builder
	tw := tar.NewWriter(&buf)
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(d, "/") + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: fixedTime}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.String()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(data)), nil })
}

// contextFile is one file COPY takes from the context.
type contextFile struct {
	src string // relative to the context ("." the context itself)
	dst string // absolute in the image
}

// copyLayer makes the layer of a COPY/ADD: srcs (context-relative, may
// be globs) to dst, owned by uid:gid (-1: root), mode (0: as in the
// context). It reads only through root (an os.Root of the context): no
// name, link or "..", can reach outside it.
func copyLayer(root *os.Root, srcs []string, dst string, dstIsDir bool, uid, gid int, mode fs.FileMode, out string, parents []string) (v1.Layer, string, error) {
	files, err := contextFiles(root, srcs, dst, dstIsDir)
	if err != nil {
		return nil, "", err
	}
	f, err := os.Create(out)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	// The cache key of the content: what the layer holds, not when the
	// context's files were last touched.
	w := &layerWriter{tw: tar.NewWriter(f), sum: sha256.New(), uid: uid, gid: gid, mode: mode}
	now := fixedTime // made directories: the same bytes every build (a stable cache key)
	for _, d := range parents {
		h := &tar.Header{Name: strings.TrimPrefix(d, "/") + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: now}
		h.Format = tar.FormatPAX
		if err := w.header(h); err != nil {
			return nil, "", err
		}
	}
	for _, cf := range files {
		if err := w.addTree(root, cf); err != nil {
			return nil, "", fmt.Errorf("COPY %s: %w", cf.src, err)
		}
	}
	if err := w.tw.Close(); err != nil {
		return nil, "", err
	}
	if err := f.Close(); err != nil {
		return nil, "", err
	}
	l, err := tarball.LayerFromFile(out)
	return l, hex.EncodeToString(w.sum.Sum(nil)), err
}

// contextFiles expands a COPY's sources (globs too) to the context's
// files and their destinations.
func contextFiles(root *os.Root, srcs []string, dst string, dstIsDir bool) ([]contextFile, error) {
	var files []contextFile
	for _, s := range srcs {
		clean := path.Clean("/" + s)[1:]
		if clean == "" {
			clean = "."
		}
		matches := []string{clean}
		if strings.ContainsAny(clean, "*?[") {
			m, err := fs.Glob(root.FS(), clean)
			if err != nil || len(m) == 0 {
				return nil, fmt.Errorf("COPY %s: no file in the context matches: %w", s, errdefs.ErrNotFound)
			}
			matches = m
		}
		for _, m := range matches {
			fi, err := root.Lstat(m)
			if err != nil {
				return nil, fmt.Errorf("COPY %s: not in the context: %w", s, errdefs.ErrNotFound)
			}
			target := dst
			if !fi.IsDir() && (dstIsDir || len(srcs) > 1 || len(matches) > 1) {
				target = path.Join(dst, path.Base(m))
			}
			files = append(files, contextFile{src: m, dst: target})
		}
	}
	return files, nil
}

// layerWriter writes a COPY layer's tar and sums what it holds.
type layerWriter struct {
	tw       *tar.Writer
	sum      hash.Hash
	uid, gid int
	mode     fs.FileMode
}

func (w *layerWriter) header(h *tar.Header) error {
	fmt.Fprintf(w.sum, "%q %c %o %d:%d %d %q\n", h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.Size, h.Linkname)
	return w.tw.WriteHeader(h)
}

// addTree adds cf's file, or its tree, from the context.
func (w *layerWriter) addTree(root *os.Root, cf contextFile) error {
	return fs.WalkDir(root.FS(), cf.src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := root.Lstat(p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, cf.src), "/")
		name := strings.TrimPrefix(path.Join(cf.dst, rel), "/")
		if name == "" {
			return nil
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = root.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return nil
		}
		h.Name = name
		if fi.IsDir() {
			h.Name += "/"
		}
		h.Uid, h.Gid, h.Uname, h.Gname = max(w.uid, 0), max(w.gid, 0), "", ""
		h.Format = tar.FormatPAX
		if w.mode != 0 && !fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0 {
			h.Mode = int64(w.mode)
		}
		if err := w.header(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			src, err := root.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(io.MultiWriter(w.tw, w.sum), io.LimitReader(src, h.Size))
			src.Close()
			return err
		}
		return nil
	})
}

// parseChown reads --chown=USER[:GROUP] and --chmod=OCTAL.
func parseFlags(flags []string, user func(string) (int, int, error)) (uid, gid int, mode fs.FileMode, err error) {
	uid, gid = -1, -1
	for _, f := range flags {
		switch {
		case strings.HasPrefix(f, "--chown="):
			uid, gid, err = user(strings.TrimPrefix(f, "--chown="))
			if err != nil {
				return 0, 0, 0, err
			}
		case strings.HasPrefix(f, "--chmod="):
			m, perr := strconv.ParseUint(strings.TrimPrefix(f, "--chmod="), 8, 32)
			if perr != nil || m > 0o777 {
				return 0, 0, 0, fmt.Errorf("%s: want an octal mode such as 644: %w", f, errdefs.ErrInvalid)
			}
			mode = fs.FileMode(m)
		}
	}
	return uid, gid, mode, nil
}

var errNoUser = errors.New("no image to look the user up in")

// fixedTime is the modification time of directories a step makes itself
// (not copied): a step must produce the same layer every time for its
// cache key to hold.
var fixedTime = time.Unix(0, 0).UTC()
