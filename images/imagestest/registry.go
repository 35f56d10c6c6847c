package imagestest

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Registry is go-containerregistry's in-process registry on a loopback
// port, with optional basic auth and faults to inject into blob reads.
type Registry struct {
	Host string // "127.0.0.1:PORT"
	srv  *httptest.Server
	user string
	pass string
	// Break, when set, makes the next GET of a blob whose digest it
	// names send half of it and drop the connection.
	Break atomic.Value // string
	// Corrupt, when set, makes GETs of that blob flip a byte.
	Corrupt atomic.Value // string
	gets    sync.Map     // digest -> *atomic.Int64
}

// NewRegistry starts a registry; with user set, every request needs
// basic auth as user:pass.
func NewRegistry(t testing.TB, user, pass string) *Registry {
	t.Helper()
	r := &Registry{user: user, pass: pass}
	r.Break.Store("")
	r.Corrupt.Store("")
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.user != "" {
			u, p, ok := req.BasicAuth()
			if !ok || u != r.user || p != r.pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
				return
			}
		}
		if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/sha256:") {
			d := req.URL.Path[strings.LastIndex(req.URL.Path, "/")+1:]
			n, _ := r.gets.LoadOrStore(d, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
			if b, _ := r.Break.Load().(string); b != "" && b == d {
				r.Break.Store("")
				r.serveBroken(w, req, inner)
				return
			}
			if c, _ := r.Corrupt.Load().(string); c != "" && c == d {
				r.serveCorrupt(w, req, inner)
				return
			}
		}
		inner.ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	r.Host = strings.TrimPrefix(r.srv.URL, "http://")
	return r
}

// Gets counts the GETs of blob digest.
func (r *Registry) Gets(digest string) int64 {
	n, ok := r.gets.Load(digest)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// serveBroken sends the headers and half the body, then cuts the
// connection.
func (r *Registry) serveBroken(w http.ResponseWriter, req *http.Request, inner http.Handler) {
	rec := httptest.NewRecorder()
	inner.ServeHTTP(rec, req)
	body := rec.Body.Bytes()
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(body[:len(body)/2])
	w.(http.Flusher).Flush()
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

func (r *Registry) serveCorrupt(w http.ResponseWriter, req *http.Request, inner http.Handler) {
	rec := httptest.NewRecorder()
	inner.ServeHTTP(rec, req)
	body := append([]byte{}, rec.Body.Bytes()...)
	if len(body) > 0 {
		body[len(body)/2] ^= 0xff
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(body)
}

// Push writes img to the registry as repo:tag ("busybox:1") and returns
// the full reference.
func (r *Registry) Push(t testing.TB, repoTag string, img v1.Image) string {
	t.Helper()
	ref, err := name.ParseReference(r.Host + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	opts := []remote.Option{}
	if r.user != "" {
		opts = append(opts, remote.WithAuth(&authn.Basic{Username: r.user, Password: r.pass}))
	}
	if err := remote.Write(ref, img, opts...); err != nil {
		t.Fatal(err)
	}
	return ref.String()
}

// DockerConfig writes a Docker config.json with the registry's
// credentials into a temp dir and points $DOCKER_CONFIG at it for the
// test (the way `docker login` leaves them).
func (r *Registry) DockerConfig(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	cfg := map[string]any{"auths": map[string]any{
		r.Host: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(r.user + ":" + r.pass))},
	}}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", dir)
}
