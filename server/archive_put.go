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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/guestpath"
)

// handleArchivePut extracts a tar (plain or gzip) into the directory
// ?path= (created). The upload is spooled to a private temp file and every
// header is checked first, so a bad archive changes nothing in the sandbox.
func (s *Server) handleArchivePut(w http.ResponseWriter, r *http.Request) {
	l, root, release := s.acquireFile(w, r)
	if l == nil {
		return
	}
	defer release()
	tmp, err := s.spoolUnlinked(w, r, l)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer tmp.Close()
	entries, err := s.checkArchive(tmp, l, root)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	total, err := extractArchive(r.Context(), tmp, l, root, entries)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.events.emit(audit.Event{Sandbox: l.sb.ID(), Type: audit.TypeFile, Message: "archive extracted through the API",
		Fields: map[string]any{"path": root, "entries": len(entries), "bytes": total, "tenant": callerOf(r).tenant}})
	writeJSON(w, http.StatusOK, map[string]any{"path": root, "entries": len(entries), "bytes": total})
}

// spoolUnlinked copies the request's archive to an unlinked temp file
// (spoolUpload's is named, for the image store), which the caller
// closes; on error it is closed here. The spool is charged to l: on its
// disk volume (outside its workspace, which it shares the volume's
// limits.disk with), else in the data directory above its reserve. The
// whole upload has UploadTimeout, however slowly the body trickles in.
func (s *Server) spoolUnlinked(w http.ResponseWriter, r *http.Request, l *live) (*diskFile, error) {
	dir, files := s.cfg.DataDir, l.disk.serverFiles()
	charged := files != nil
	if charged {
		dir = l.disk.root
	}
	// Unlinked at once: nothing is left behind by a crash or a shutdown.
	// On a volume, a pause closes it (diskfiles.go).
	tmp, err := files.createTemp(dir, ".upload-*.tar")
	if err != nil {
		return nil, fmt.Errorf("archive upload: spool: %w", err)
	}
	var dst io.Writer = &guardedWriter{w: tmp, check: s.storageErr}
	if charged {
		dst = &quotaWriter{w: tmp, id: l.sb.ID()}
	}
	body := newTotalDeadline(w, http.MaxBytesReader(w, r.Body, s.cfg.MaxUpload), s.cfg.UploadTimeout)
	err = spoolArchive(dst, body, s.cfg.MaxUpload)
	body.stop()
	if err != nil {
		tmp.Close()
		if body.passed.Load() {
			return nil, fmt.Errorf("archive upload: not received within the server's %s for an upload: %w", s.cfg.UploadTimeout, sandbox.ErrTimeout)
		}
		return nil, err
	}
	return tmp, nil
}

// quotaWriter is a spool on a sandbox's volume: full is the sandbox's
// disk quota, said so (507).
type quotaWriter struct {
	w  io.Writer
	id string
}

func (q *quotaWriter) Write(p []byte) (int, error) {
	n, err := q.w.Write(p)
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return n, &httpError{api.CodeInsufficientStorage, fmt.Errorf("archive upload: its spool filled sandbox %q's disk (limits.disk; the spool and what it extracts share it): %w", q.id, sandbox.ErrLimit)}
	}
	return n, err
}

// totalDeadline ends a request body's reads once d has passed since it
// was made: the connection's read deadline is set to now (a read blocked
// on a trickling client returns) and every later read fails.
type totalDeadline struct {
	r      io.Reader
	passed atomic.Bool
	t      *time.Timer
}

func newTotalDeadline(w http.ResponseWriter, r io.Reader, d time.Duration) *totalDeadline {
	td := &totalDeadline{r: r}
	rc := http.NewResponseController(w)
	td.t = time.AfterFunc(d, func() {
		td.passed.Store(true)
		_ = rc.SetReadDeadline(time.Now())
	})
	return td
}

func (td *totalDeadline) Read(p []byte) (int, error) {
	if td.passed.Load() {
		return 0, fmt.Errorf("upload deadline passed: %w", sandbox.ErrTimeout)
	}
	return td.r.Read(p)
}

func (td *totalDeadline) stop() { td.t.Stop() }

// checkArchive is the first pass over a spooled upload: every header is
// valid, writable under root for l, and within the entry, depth and
// extracted-size limits. It returns the entries in tar order.
func (s *Server) checkArchive(tmp io.ReadSeeker, l *live, root string) ([]tarEntry, error) {
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	var entries []tarEntry
	var size int64 // what extraction writes: sparse entries count by their size
	tr := tar.NewReader(tmp)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return entries, nil
		}
		if err != nil {
			return nil, errBadRequest("archive upload: not a tar: %v", err)
		}
		e, err := checkTarHeader(h)
		if err == nil {
			err = l.protect.CheckWrite("extract", path.Join(root, e.rel))
		}
		if err != nil {
			return nil, err
		}
		if len(entries) >= maxArchiveEntries {
			return nil, errBadRequest("archive upload: more than %d entries", maxArchiveEntries)
		}
		if strings.Count(e.rel, "/") > maxArchiveDepth {
			return nil, errBadRequest("archive entry %q: deeper than %d", e.rel, maxArchiveDepth)
		}
		if size += e.size; size > s.cfg.MaxExtract {
			return nil, errTooLarge(fmt.Sprintf("archive upload: entries up to %q extract to more than %d bytes (sparse files count by their size)", h.Name, s.cfg.MaxExtract), s.cfg.MaxExtract)
		}
		entries = append(entries, e)
	}
}

// extractArchive is the second pass: it writes the checked entries under
// root through the sandbox's Files, which resolves every path inside the
// sandbox (never through a symlink out of it), and returns the bytes
// written. On error the files it created are removed again, so a failed
// upload leaves no partial tree (files it replaced stay replaced: each
// write is whole, never half).
func extractArchive(ctx context.Context, tmp io.ReadSeeker, l *live, root string, entries []tarEntry) (total int64, err error) {
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	files := l.sb.Files()
	if err := files.Mkdir(ctx, root, 0o755, true); err != nil && !errors.Is(err, sandbox.ErrExists) {
		return 0, fmt.Errorf("extract into %q in %q: %w", root, l.sb.ID(), err)
	}
	var created []string
	defer func() {
		if err == nil {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for i := len(created) - 1; i >= 0; i-- {
			_ = files.Remove(cctx, created[i], false)
		}
	}()
	tr := tar.NewReader(tmp)
	for i := 0; ; i++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil || i >= len(entries) {
			return 0, errBadRequest("archive upload: changed while extracting")
		}
		e := entries[i]
		target := path.Join(root, e.rel)
		if err := extractEntry(ctx, files, tr, h.Size, target, e, &created); err != nil {
			return 0, fmt.Errorf("extract %q in %q: %w", target, l.sb.ID(), err)
		}
		if !e.dir {
			total += h.Size
		}
	}
}

// extractEntry writes one entry at target: a directory (kept if it is
// there), or a file of size bytes from tr, appended to created when
// nothing was at target before.
func extractEntry(ctx context.Context, files sandbox.Files, tr io.Reader, size int64, target string, e tarEntry, created *[]string) error {
	if e.dir {
		mode := e.mode
		if mode == 0 {
			mode = 0o755
		}
		if err := files.Mkdir(ctx, target, mode, true); err != nil && !errors.Is(err, sandbox.ErrExists) {
			return err
		}
		return nil
	}
	mode := e.mode
	if mode == 0 {
		mode = 0o644
	}
	if _, err := files.Stat(ctx, target); errors.Is(err, sandbox.ErrNotFound) {
		*created = append(*created, target)
	}
	return files.WriteFile(ctx, target, io.LimitReader(tr, size), mode, true)
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
	rel, err := guestpath.CleanRel(h.Name)
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
	case errors.As(err, &he), errors.Is(err, errDetached):
		return err // errDetached: the request's sandbox was paused under it (explain)
	case isMaxBytes(err):
		return errTooLarge("archive", limit)
	case err != nil:
		return errBadRequest("archive upload: %v", err)
	case n > limit:
		return errTooLarge("archive (uncompressed)", limit)
	}
	return nil
}
