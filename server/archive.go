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
	"os"
	"path"
	"strings"
	"time"

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
	// The tree is listed first: over the entry or depth limit the answer
	// is an error, never a 200 with a silently cut tar.
	var tree []treeEntry
	if err := listTree(r.Context(), files, root, path.Base(root), fi, 0, &tree); err != nil {
		s.writeError(w, r, fmt.Errorf("archive %q in %q: %w", root, l.sb.ID(), err))
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.WriteHeader(http.StatusOK)
	tw := tar.NewWriter(w)
	for _, e := range tree {
		if err := tarEntryOut(r.Context(), files, tw, e); err != nil {
			// A file that changed meanwhile, or the client went away: the
			// client sees a truncated tar (no end blocks).
			s.log.Warn("archive download ended early", "sandbox", l.sb.ID(), "path", root, "err", err)
			return
		}
	}
	tw.Close()
}

// treeEntry is one entry of a download: its path inside, its name in the
// tar and what List said of it.
type treeEntry struct {
	p, name string
	fi      sandbox.FileInfo
}

// listTree appends the tree at p to out (directories before their
// entries), failing with ErrLimit beyond the entry or depth limit.
func listTree(ctx context.Context, files sandbox.Files, p, name string, fi sandbox.FileInfo, depth int, out *[]treeEntry) error {
	if len(*out) >= maxArchiveEntries {
		return fmt.Errorf("more than %d entries: %w", maxArchiveEntries, sandbox.ErrLimit)
	}
	if depth > maxArchiveDepth {
		return fmt.Errorf("deeper than %d: %w", maxArchiveDepth, sandbox.ErrLimit)
	}
	if name == "/" || name == "" {
		name = "."
	}
	*out = append(*out, treeEntry{p, name, fi})
	if !fi.IsDir || fi.Mode&fs.ModeSymlink != 0 {
		return nil
	}
	kids, err := files.List(ctx, p)
	if err != nil {
		return err
	}
	for _, k := range kids {
		if err := listTree(ctx, files, path.Join(p, k.Name), path.Join(name, k.Name), k, depth+1, out); err != nil {
			return err
		}
	}
	return nil
}

// tarEntryOut writes one listed entry.
func tarEntryOut(ctx context.Context, files sandbox.Files, tw *tar.Writer, e treeEntry) error {
	p, name, fi := e.p, e.name, e.fi
	hdr := &tar.Header{Name: name, Mode: int64(fi.Mode.Perm()), ModTime: fi.ModTime}
	switch {
	case fi.Mode&fs.ModeSymlink != 0:
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, fi.Link
		return tw.WriteHeader(hdr)
	case fi.IsDir:
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
		return tw.WriteHeader(hdr)
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
	case tar.TypeReg, tar.TypeGNUSparse:
		// A sparse file is a regular file here: it counts, and is
		// written, by its size (its holes become zeros).
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
	var he *httpError
	switch {
	case errors.As(err, &he):
		return err
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
	tmp, err := os.CreateTemp(s.cfg.DataDir, "upload-*.tar")
	if err != nil {
		s.writeError(w, r, fmt.Errorf("archive upload: spool: %w", err))
		return
	}
	// Unlinked at once: nothing is left behind by a crash or a shutdown.
	os.Remove(tmp.Name())
	defer tmp.Close()
	if err := spoolArchive(&guardedWriter{w: tmp, check: s.storageErr}, http.MaxBytesReader(w, r.Body, s.cfg.MaxUpload), s.cfg.MaxUpload); err != nil {
		s.writeError(w, r, err)
		return
	}
	// Pass 1: validate.
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		s.writeError(w, r, err)
		return
	}
	var entries []tarEntry
	var size int64 // what extraction writes: sparse entries count by their size
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
		if size += e.size; size > s.cfg.MaxExtract {
			s.writeError(w, r, errTooLarge(fmt.Sprintf("archive upload: entries up to %q extract to more than %d bytes (sparse files count by their size)", h.Name, s.cfg.MaxExtract), s.cfg.MaxExtract))
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
	// Files this extraction created: removed again if it fails, so a
	// failed upload leaves no partial tree (files it replaced stay
	// replaced: each write is whole, never half).
	var created []string
	ok := false
	defer func() {
		if ok {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
		defer cancel()
		for i := len(created) - 1; i >= 0; i-- {
			_ = files.Remove(ctx, created[i], false)
		}
	}()
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
		if _, err := files.Stat(r.Context(), target); errors.Is(err, sandbox.ErrNotFound) {
			created = append(created, target)
		}
		if err := files.WriteFile(r.Context(), target, io.LimitReader(tr, h.Size), mode, true); err != nil {
			s.writeError(w, r, fmt.Errorf("extract %q in %q: %w", target, l.sb.ID(), err))
			return
		}
		total += h.Size
	}
	ok = true
	s.events.emit(audit.Event{Sandbox: l.sb.ID(), Type: audit.TypeFile, Message: "archive extracted through the API",
		Fields: map[string]any{"path": root, "entries": len(entries), "bytes": total, "tenant": callerOf(r).tenant}})
	writeJSON(w, http.StatusOK, map[string]any{"path": root, "entries": len(entries), "bytes": total})
}
