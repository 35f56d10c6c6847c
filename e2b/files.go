package e2b

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/sandbox"
)

// signature is E2B's URL signature of a /files operation ("read" or
// "write") on the raw path for user with the sandbox's access token, and
// the expiry (unix seconds) when the URL carries one.
func signature(p, op, user, token, exp string) string {
	s := p + ":" + op + ":" + user + ":" + token
	if exp != "" {
		s += ":" + exp
	}
	sum := sha256.Sum256([]byte(s))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// checkSignature verifies a signed /files URL of r for token.
func checkSignature(r *http.Request, token string) error {
	q := r.URL.Query()
	sig := q.Get("signature")
	if sig == "" {
		return errors.New("missing signature query parameter")
	}
	op := "read"
	if r.Method == http.MethodPost {
		op = "write"
	}
	want := signature(q.Get("path"), op, q.Get("username"), token, q.Get("signature_expiration"))
	if subtle.ConstantTimeCompare([]byte(sig), []byte(want)) != 1 {
		return errors.New("invalid signature")
	}
	if e := q.Get("signature_expiration"); e != "" {
		n, err := strconv.ParseInt(e, 10, 64)
		if err != nil || time.Now().Unix() > n {
			return errors.New("signature is already expired")
		}
	}
	return nil
}

// handleFiles is envd's /files: download (GET) and upload (POST).
func (e *envd) handleFiles(w http.ResponseWriter, r *http.Request, sc *scope, signed bool) {
	if signed {
		if err := checkSignature(r, sc.token); err != nil {
			writeErr(w, http.StatusUnauthorized, "%s", err.Error())
			return
		}
	}
	switch r.Method {
	case http.MethodGet:
		e.download(w, r, sc)
	case http.MethodPost:
		e.upload(w, r, sc)
	default:
		w.Header().Set("Allow", "GET, POST")
		writeErr(w, http.StatusMethodNotAllowed, "%s /files: method not allowed", r.Method)
	}
}

func (e *envd) download(w http.ResponseWriter, r *http.Request, sc *scope) {
	p := sc.resolve(r.URL.Query().Get("path"))
	fi, err := sc.c.Stat(r.Context(), sc.id, p)
	if err != nil {
		if statusOf(err) == http.StatusNotFound {
			if _, ok := sc.running(r.Context()); ok {
				writeErr(w, http.StatusNotFound, "path '%s' does not exist", p)
				return
			}
			notRunning(w, sc.e2bID)
			return
		}
		writeFailure(w, err)
		return
	}
	if fi.IsDir {
		writeErr(w, http.StatusBadRequest, "path '%s' is a directory", p)
		return
	}
	rc, err := sc.c.ReadFile(r.Context(), sc.id, p)
	if err != nil {
		writeFailure(w, err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": path.Base(p)}))
	w.Header().Set("Last-Modified", fi.ModTime.UTC().Format(http.TimeFormat))
	if fi.Size == 0 {
		w.Header().Set("Content-Length", "0")
	}
	w.WriteHeader(http.StatusOK)
	io.Copy(w, rc)
}

// uploaded is one entry of an upload's answer.
type uploaded struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
	// Metadata is what the upload set (E2B's WriteInfo.metadata).
	Metadata map[string]string `json:"metadata,omitempty"`
}

func (e *envd) upload(w http.ResponseWriter, r *http.Request, sc *scope) {
	meta, err := fileMetadataOf(r.Header)
	if err != nil {
		writeErr(w, http.StatusBadRequest, "%s", err.Error())
		return
	}
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	target := r.URL.Query().Get("path")
	var out []uploaded
	switch ct {
	case "application/octet-stream":
		if target == "" {
			writeErr(w, http.StatusBadRequest, "path: required for an octet-stream upload")
			return
		}
		body := io.Reader(r.Body)
		switch enc := strings.ToLower(r.Header.Get("Content-Encoding")); enc {
		case "", "identity":
		case "gzip":
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				writeErr(w, http.StatusBadRequest, "gzip body: %v", err)
				return
			}
			defer zr.Close()
			body = zr
		default:
			writeErr(w, http.StatusBadRequest, "Content-Encoding %q: only gzip", enc)
			return
		}
		u, err := e.put(r.Context(), sc, sc.resolve(target), body, meta)
		if err != nil {
			e.writeUploadErr(w, r, sc, err)
			return
		}
		out = append(out, u)
	case "multipart/form-data":
		var ok bool
		if out, ok = e.uploadParts(w, r, sc, params["boundary"], target, meta); !ok {
			return
		}
	default:
		writeErr(w, http.StatusBadRequest, "Content-Type %q: want multipart/form-data or application/octet-stream", ct)
		return
	}
	if out == nil {
		out = []uploaded{}
	}
	writeJSON(w, http.StatusOK, out)
}

// uploadParts writes every part named "file" of a multipart upload; on
// false it answered.
func (e *envd) uploadParts(w http.ResponseWriter, r *http.Request, sc *scope, boundary, target string, meta map[string]string) ([]uploaded, bool) {
	var out []uploaded
	mr := multipart.NewReader(r.Body, boundary)
	seen := map[string]bool{}
	for {
		part, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			writeErr(w, http.StatusBadRequest, "multipart body: %v", err)
			return nil, false
		}
		_, dp, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
		if dp["name"] != "file" {
			part.Close()
			continue
		}
		// The raw filename is the whole path (Part.FileName drops directories).
		p := target
		if p == "" {
			p = dp["filename"]
		}
		p = sc.resolve(p)
		if seen[p] {
			writeErr(w, http.StatusBadRequest, "path '%s' is given twice", p)
			return nil, false
		}
		seen[p] = true
		u, err := e.put(r.Context(), sc, p, part, meta)
		part.Close()
		if err != nil {
			e.writeUploadErr(w, r, sc, err)
			return nil, false
		}
		out = append(out, u)
	}
	return out, true
}

// put writes body to p (parents made) with exactly the metadata meta and
// gives it to the caller's user.
func (e *envd) put(ctx context.Context, sc *scope, p string, body io.Reader, meta map[string]string) (uploaded, error) {
	if err := sc.c.WriteFileMetadata(ctx, sc.id, p, body, 0o644, meta); err != nil {
		return uploaded{}, err
	}
	e.chown(ctx, sc, p)
	return uploaded{Path: p, Name: path.Base(p), Type: "file", Metadata: meta}, nil
}

// metadataPrefix starts the request headers that carry file metadata.
const metadataPrefix = "X-Metadata-"

// fileMetadataOf is the file metadata an upload's headers carry, as envd reads
// it: every X-Metadata-KEY header, KEY lower-cased, the first value of a
// repeated one; nil when none. Keys and values are checked here (so a bad
// one writes nothing) and again by the sandbox's side.
func fileMetadataOf(h http.Header) (map[string]string, error) {
	var m map[string]string
	for k, vs := range h {
		if len(k) < len(metadataPrefix) || !strings.EqualFold(k[:len(metadataPrefix)], metadataPrefix) {
			continue
		}
		key := strings.ToLower(k[len(metadataPrefix):])
		if m == nil {
			m = map[string]string{}
		}
		if _, dup := m[key]; dup || len(vs) == 0 {
			continue // two spellings of one key: the first seen wins
		}
		m[key] = vs[0]
	}
	if err := sandbox.CheckMetadata(m); err != nil {
		return nil, fmt.Errorf("invalid metadata: %w", err)
	}
	return m, nil
}

func (e *envd) writeUploadErr(w http.ResponseWriter, r *http.Request, sc *scope, err error) {
	switch statusOf(err) {
	case http.StatusInsufficientStorage, http.StatusRequestEntityTooLarge:
		writeErr(w, http.StatusInsufficientStorage, "not enough disk space available: %s", messageOf(err))
	case http.StatusNotFound, http.StatusConflict:
		if _, ok := sc.running(r.Context()); !ok {
			notRunning(w, sc.e2bID)
			return
		}
		writeFailure(w, err)
	default:
		writeFailure(w, err)
	}
}

// chown gives what a file call made at p to the caller's user, as envd
// (root inside, files chowned to the user) does: a best effort, through
// a process of the sandbox's own as root.
func (e *envd) chown(ctx context.Context, sc *scope, p string) {
	if sc.user == "root" {
		return
	}
	_, _ = sc.c.RunRequest(ctx, sc.id, api.ExecRequest{Args: []string{"chown", "-h", sc.user + ":", p}, User: "root", Timeout: api.Duration(10 * time.Second)})
}

var _ = fmt.Sprintf
