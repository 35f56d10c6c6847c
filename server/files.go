package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/guestpath"
)

func parseMode(v string, def fs.FileMode) (fs.FileMode, error) {
	if v == "" {
		return def, nil
	}
	m, err := strconv.ParseUint(v, 8, 32)
	if err != nil {
		return 0, errBadRequest("mode %q: want octal permission bits such as 0644", v)
	}
	return checkMode(m)
}

// checkMode accepts permission bits only: a set-uid or set-gid file made
// through the API would be a way to run code with more rights later, and
// the sandboxes refuse them anyway.
func checkMode(m uint64) (fs.FileMode, error) {
	if m > 0o777 {
		return 0, errBadRequest("mode %04o: only permission bits 0000-0777 are accepted (no set-uid, set-gid or sticky bit)", m)
	}
	return fs.FileMode(m), nil
}

func (s *Server) handleFileRead(w http.ResponseWriter, r *http.Request) {
	l, p, release := s.acquireFile(w, r)
	if l == nil {
		return
	}
	defer release()
	rc, err := l.sb.Files().ReadFile(r.Context(), p)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("read %q in %q: %w", p, l.sb.ID(), err))
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	io.Copy(w, rc)
}

func (s *Server) handleFileWrite(w http.ResponseWriter, r *http.Request) {
	l, p, release := s.acquireFile(w, r)
	if l == nil {
		return
	}
	defer release()
	q := r.URL.Query()
	mode, err := parseMode(q.Get("mode"), 0o644)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if r.ContentLength > s.cfg.MaxUpload {
		s.writeError(w, r, errTooLarge("file", s.cfg.MaxUpload))
		return
	}
	if strings.HasSuffix(q.Get("path"), "/") {
		s.writeError(w, r, errBadRequest("write %q: ends with \"/\": name the file to write, not a directory", q.Get("path")))
		return
	}
	if err := l.protect.CheckWrite("write", p); err != nil {
		s.writeError(w, r, err)
		return
	}
	meta, err := fileMetadata(l, p, q.Get("metadata"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	files := l.sb.Files()
	// Write a hidden sibling and rename it into place: a broken or
	// oversized upload never leaves a half-written file at path.
	tmp := path.Join(path.Dir(p), api.UploadTempPrefix+newID(""))
	body := &countingReader{r: http.MaxBytesReader(w, r.Body, s.cfg.MaxUpload)}
	err = files.WriteFile(r.Context(), tmp, body, mode, q.Get("mkdirs") != "false")
	if err == nil && body.err != nil {
		err = body.err // the sandbox accepted a short file: the body broke off
	}
	if err == nil && meta != nil {
		// On the sibling: the file appears at p with its metadata, and a
		// write without metadata leaves none of the file it replaced.
		err = files.(sandbox.MetadataFiles).SetMetadata(r.Context(), tmp, meta)
	}
	if err == nil {
		err = files.Rename(r.Context(), tmp, p)
	}
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
		files.Remove(rctx, tmp, false)
		// A directory at p is the usual reason: say so (looked at only
		// after a failure, so a write costs no extra round trip).
		fi, serr := files.Stat(rctx, p)
		cancel()
		switch {
		case serr == nil && fi.IsDir:
			s.writeError(w, r, errBadRequest("write %q: is a directory", p))
		case isMaxBytes(err) || isMaxBytes(body.err):
			s.writeError(w, r, errTooLarge("file", s.cfg.MaxUpload))
		case body.err != nil && errors.Is(err, body.err):
			s.writeError(w, r, errBadRequest("write %q: request body: %v", p, body.err))
		default:
			// The sibling is our detail: the caller asked for p.
			s.writeError(w, r, fmt.Errorf("write %q in %q: %w", p, l.sb.ID(), &renamedError{err, tmp, p}))
		}
		return
	}
	s.events.emit(audit.Event{Sandbox: l.sb.ID(), Type: audit.TypeFile, Message: "file written through the API",
		Fields: map[string]any{"path": p, "bytes": body.n, "tenant": callerOf(r).tenant}})
	writeJSON(w, http.StatusOK, map[string]any{"path": p, "bytes": body.n})
}

// fileMetadata is the metadata a write asks for (query "metadata", a JSON
// object of strings; nil when absent), checked before anything is written.
func fileMetadata(l *live, p, raw string) (map[string]string, error) {
	if raw == "" {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, errBadRequest("write %q: metadata: want a JSON object of strings: %v", p, err)
	}
	if err := sandbox.CheckMetadata(m); err != nil {
		return nil, fmt.Errorf("write %q: %w", p, err)
	}
	if len(m) == 0 {
		return nil, nil
	}
	if _, ok := l.sb.Files().(sandbox.MetadataFiles); !ok {
		return nil, fmt.Errorf("write %q: file metadata: the %s backend keeps none (no extended attributes): %w", p, l.backend, sandbox.ErrNotSupported)
	}
	return m, nil
}

// renamedError is err with every mention of the name old replaced by new
// in its text; it unwraps to err, so its kind is unchanged.
type renamedError struct {
	err      error
	old, new string
}

func (e *renamedError) Error() string { return strings.ReplaceAll(e.err.Error(), e.old, e.new) }
func (e *renamedError) Unwrap() error { return e.err }

// countingReader counts bytes and keeps the first non-EOF error.
type countingReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return n, err
}

func (s *Server) handleFileRemove(w http.ResponseWriter, r *http.Request) {
	l, p, release := s.acquireFile(w, r)
	if l == nil {
		return
	}
	defer release()
	if p == "/" {
		s.writeError(w, r, errBadRequest("remove %q: refusing to remove the root", p))
		return
	}
	if err := l.protect.CheckMove("remove", p); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := l.sb.Files().Remove(r.Context(), p, r.URL.Query().Get("recursive") == "true"); err != nil {
		s.writeError(w, r, fmt.Errorf("remove %q in %q: %w", p, l.sb.ID(), err))
		return
	}
	s.events.emit(audit.Event{Sandbox: l.sb.ID(), Type: audit.TypeFile, Message: "file removed through the API",
		Fields: map[string]any{"path": p, "tenant": callerOf(r).tenant}})
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleFileStat(w http.ResponseWriter, r *http.Request) {
	l, p, release := s.acquireFile(w, r)
	if l == nil {
		return
	}
	defer release()
	fi, err := l.sb.Files().Stat(r.Context(), p)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("stat %q in %q: %w", p, l.sb.ID(), err))
		return
	}
	writeJSON(w, http.StatusOK, apiFileInfo(fi))
}

func (s *Server) handleFileList(w http.ResponseWriter, r *http.Request) {
	l, p, release := s.acquireFile(w, r)
	if l == nil {
		return
	}
	defer release()
	fis, err := l.sb.Files().List(r.Context(), p)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("list %q in %q: %w", p, l.sb.ID(), err))
		return
	}
	out := api.FileList{Files: make([]api.FileInfo, 0, len(fis))}
	for _, fi := range fis {
		out.Files = append(out.Files, apiFileInfo(fi))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleFileRename(w http.ResponseWriter, r *http.Request) {
	l, release := s.acquire(w, r)
	if l == nil {
		return
	}
	defer release()
	var req api.RenameRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	from, err := guestpath.Clean(req.From)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	to, err := guestpath.Clean(req.To)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := l.protect.CheckRename(from, to); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := l.sb.Files().Rename(r.Context(), from, to); err != nil {
		s.writeError(w, r, fmt.Errorf("rename %q to %q in %q: %w", from, to, l.sb.ID(), err))
		return
	}
	s.events.emit(audit.Event{Sandbox: l.sb.ID(), Type: audit.TypeFile, Message: "file renamed through the API",
		Fields: map[string]any{"from": from, "to": to, "tenant": callerOf(r).tenant}})
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleFileMkdir(w http.ResponseWriter, r *http.Request) {
	l, release := s.acquire(w, r)
	if l == nil {
		return
	}
	defer release()
	var req api.MkdirRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	p, err := guestpath.Clean(req.Path)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	mode, err := checkMode(uint64(req.Mode))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if mode == 0 {
		mode = 0o755
	}
	if err := l.protect.CheckWrite("mkdir", p); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := l.sb.Files().Mkdir(r.Context(), p, mode, req.Parents); err != nil {
		s.writeError(w, r, fmt.Errorf("mkdir %q in %q: %w", p, l.sb.ID(), err))
		return
	}
	w.WriteHeader(http.StatusCreated)
}
