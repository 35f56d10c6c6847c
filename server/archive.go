package server

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/sandbox"
)

// Archive limits: entries per upload or download, and directory depth.
const (
	maxArchiveEntries = 100000
	maxArchiveDepth   = 64
)

// handleArchiveGet streams the tree at ?path= as a tar. Symlinks are
// stored as links (never followed); special files are skipped.
func (s *Server) handleArchiveGet(w http.ResponseWriter, r *http.Request) {
	l, root, release := s.acquireFile(w, r)
	if l == nil {
		return
	}
	defer release()
	files := l.sb.Files()
	fi, err := files.Stat(r.Context(), root)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("archive %q in %q: %w", root, l.sb.ID(), err))
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.WriteHeader(http.StatusOK)
	tw := tar.NewWriter(w)
	n := 0
	if err := s.tarTree(r.Context(), files, tw, root, path.Base(root), fi, 0, &n); err != nil {
		s.log.Warn("archive download ended early", "sandbox", l.sb.ID(), "path", root, "err", err)
		return // the client sees a truncated tar (no end blocks)
	}
	tw.Close()
}

func (s *Server) tarTree(ctx context.Context, files sandbox.Files, tw *tar.Writer, p, name string, fi sandbox.FileInfo, depth int, n *int) error {
	*n++
	if *n > maxArchiveEntries {
		return fmt.Errorf("more than %d entries: %w", maxArchiveEntries, sandbox.ErrLimit)
	}
	if depth > maxArchiveDepth {
		return fmt.Errorf("deeper than %d: %w", maxArchiveDepth, sandbox.ErrLimit)
	}
	if name == "/" || name == "" {
		name = "."
	}
	hdr := &tar.Header{Name: name, Mode: int64(fi.Mode.Perm()), ModTime: fi.ModTime}
	switch {
	case fi.Mode&fs.ModeSymlink != 0:
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, fi.Link
		return tw.WriteHeader(hdr)
	case fi.IsDir:
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		kids, err := files.List(ctx, p)
		if err != nil {
			return err
		}
		for _, k := range kids {
			if err := s.tarTree(ctx, files, tw, path.Join(p, k.Name), path.Join(name, k.Name), k, depth+1, n); err != nil {
				return err
			}
		}
		return nil
	case fi.Mode.IsRegular():
		rc, err := files.ReadFile(ctx, p)
		if err != nil {
			return err
		}
		defer rc.Close()
		hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		// The file may have changed since Stat: copy exactly Size bytes.
		got, err := io.Copy(tw, io.LimitReader(rc, fi.Size))
		if err != nil {
			return err
		}
		if got < fi.Size {
			return fmt.Errorf("%s: shrank while archiving", p)
		}
		return nil
	default:
		return nil // devices, fifos, sockets
	}
}

// tarEntry is one validated entry of an upload.
type tarEntry struct {
	rel  string
	dir  bool
	mode fs.FileMode
	size int64
}

// checkTarHeader validates one header of an upload: only regular files and
// directories with relative names that stay inside the target.
func checkTarHeader(h *tar.Header) (tarEntry, error) {
	rel, err := cleanRelPath(h.Name)
	if err != nil {
		return tarEntry{}, err
	}
	e := tarEntry{rel: rel, mode: fs.FileMode(h.Mode).Perm(), size: h.Size}
	switch h.Typeflag {
	case tar.TypeDir:
		e.dir = true
	case tar.TypeReg:
		if rel == "" {
			return tarEntry{}, errBadRequest("archive entry %q: a file cannot be the target itself", h.Name)
		}
	case tar.TypeSymlink, tar.TypeLink:
		return tarEntry{}, errBadRequest("archive entry %q: links are not accepted (link to %q)", h.Name, h.Linkname)
	default:
		return tarEntry{}, errBadRequest("archive entry %q: type %q not accepted (only files and directories)", h.Name, string(h.Typeflag))
	}
	if h.Size < 0 {
		return tarEntry{}, errBadRequest("archive entry %q: negative size", h.Name)
	}
	return e, nil
}

// spoolArchive copies an uploaded tar, plain or gzip-compressed (told by
// its magic number), to dst, at most limit bytes of tar either way: a small
// compressed body must not expand past the upload limit.
func spoolArchive(dst io.Writer, body io.Reader, limit int64) error {
	br := bufio.NewReader(body)
	var src io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			if isMaxBytes(err) {
				return errTooLarge("archive", limit)
			}
			return errBadRequest("archive upload: gzip: %v", err)
		}
		defer zr.Close()
		src = zr
	}
	n, err := io.Copy(dst, io.LimitReader(src, limit+1))
	switch {
	case isMaxBytes(err):
		return errTooLarge("archive", limit)
	case err != nil:
		return errBadRequest("archive upload: %v", err)
	case n > limit:
		return errTooLarge("archive (uncompressed)", limit)
	}
	return nil
}

// handleArchivePut extracts a tar (plain or gzip) into the directory
// ?path= (created). The upload is spooled to a private temp file and every header is checked
// first, so a bad archive changes nothing in the sandbox.
func (s *Server) handleArchivePut(w http.ResponseWriter, r *http.Request) {
	l, root, release := s.acquireFile(w, r)
	if l == nil {
		return
	}
	defer release()
	tmp, done, err := s.spoolUpload(w, r, "upload-*.tar")
	if err != nil {
		s.writeError(w, r, fmt.Errorf("archive upload: %w", err))
		return
	}
	defer done()
	// Pass 1: validate.
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		s.writeError(w, r, err)
		return
	}
	var entries []tarEntry
	tr := tar.NewReader(tmp)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			s.writeError(w, r, errBadRequest("archive upload: not a tar: %v", err))
			return
		}
		e, err := checkTarHeader(h)
		if err == nil {
			err = l.protect.checkWrite("extract", path.Join(root, e.rel))
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if len(entries) >= maxArchiveEntries {
			s.writeError(w, r, errBadRequest("archive upload: more than %d entries", maxArchiveEntries))
			return
		}
		if strings.Count(e.rel, "/") > maxArchiveDepth {
			s.writeError(w, r, errBadRequest("archive entry %q: deeper than %d", e.rel, maxArchiveDepth))
			return
		}
		entries = append(entries, e)
	}
	// Pass 2: extract through the sandbox's Files, which resolves every
	// path inside the sandbox (never through a symlink out of it).
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		s.writeError(w, r, err)
		return
	}
	files := l.sb.Files()
	if err := files.Mkdir(r.Context(), root, 0o755, true); err != nil && !errors.Is(err, sandbox.ErrExists) {
		s.writeError(w, r, fmt.Errorf("extract into %q in %q: %w", root, l.sb.ID(), err))
		return
	}
	tr = tar.NewReader(tmp)
	var total int64
	for i := 0; ; i++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || i >= len(entries) {
			s.writeError(w, r, errBadRequest("archive upload: changed while extracting"))
			return
		}
		e := entries[i]
		target := path.Join(root, e.rel)
		if e.dir {
			mode := e.mode
			if mode == 0 {
				mode = 0o755
			}
			if err := files.Mkdir(r.Context(), target, mode, true); err != nil && !errors.Is(err, sandbox.ErrExists) {
				s.writeError(w, r, fmt.Errorf("extract %q in %q: %w", target, l.sb.ID(), err))
				return
			}
			continue
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		if err := files.WriteFile(r.Context(), target, io.LimitReader(tr, h.Size), mode, true); err != nil {
			s.writeError(w, r, fmt.Errorf("extract %q in %q: %w", target, l.sb.ID(), err))
			return
		}
		total += h.Size
	}
	s.events.emit(audit.Event{Sandbox: l.sb.ID(), Type: audit.TypeFile, Message: "archive extracted through the API",
		Fields: map[string]any{"path": root, "entries": len(entries), "bytes": total, "tenant": callerOf(r).tenant}})
	writeJSON(w, http.StatusOK, map[string]any{"path": root, "entries": len(entries), "bytes": total})
}
