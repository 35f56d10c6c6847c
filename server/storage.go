package server

import (
	"fmt"
	"io"
	"net/http"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/sandbox"
)

// storageGuard watches the free space of the data directory's filesystem
// (the store, spooled uploads): below min the server refuses new work with
// 507 and says so in /healthz, so that what it must write (audit events
// above all) still fits.
type storageGuard struct {
	dir  string
	min  uint64
	free func(dir string) (uint64, error) // statfs; tests replace it
}

// low returns why new work is refused now, or "".
func (g *storageGuard) low() string {
	if g == nil || g.min == 0 {
		return ""
	}
	free, err := g.free(g.dir)
	if err != nil {
		return fmt.Sprintf("cannot read the free space of %s: %v", g.dir, err)
	}
	if free < g.min {
		return fmt.Sprintf("%d bytes free on the data directory's filesystem, fewer than the %d the server keeps for its store and audit events", free, g.min)
	}
	return ""
}

// needsStorage wraps a route that starts new work (creates, execs,
// writes): 507 while storage is low.
func (s *Server) needsStorage(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if why := s.storage.low(); why != "" {
			s.writeError(w, r, &httpError{api.CodeInsufficientStorage,
				fmt.Errorf("%s %s: refused: %s: %w", r.Method, r.URL.Path, why, sandbox.ErrLimit)})
			return
		}
		h(w, r)
	}
}

// storageErr is the 507 error while storage is low, else nil.
func (s *Server) storageErr() error {
	if why := s.storage.low(); why != "" {
		return &httpError{api.CodeInsufficientStorage, fmt.Errorf("refused: %s: %w", why, sandbox.ErrLimit)}
	}
	return nil
}

// guardedWriter writes to w, checking every guardEvery bytes that the
// data disk keeps its reserve: an upload spooled there stops before the
// store would run out of room.
type guardedWriter struct {
	w     io.Writer
	check func() error
	since int64
}

const guardEvery = 4 << 20

func (g *guardedWriter) Write(p []byte) (int, error) {
	if g.since += int64(len(p)); g.since >= guardEvery {
		g.since = 0
		if err := g.check(); err != nil {
			return 0, err
		}
	}
	return g.w.Write(p)
}
