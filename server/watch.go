package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/sandbox"
)

// handleFileWatch streams the changes under ?path= inside the sandbox
// (recursive=true: its whole tree) as NDJSON lines, or SSE events with
// Accept: text/event-stream, until the client goes away, the sandbox ends
// or the watched path does. The guest watches (inotify) and bounds what
// it holds; a client that pauses reading gets an overflow event, one that
// stops reading for longer than the write timeout (Config.IOTimeout) is
// cut off like every silent client.
func (s *Server) handleFileWatch(w http.ResponseWriter, r *http.Request) {
	l, p, release := s.acquireFile(w, r)
	if l == nil {
		return
	}
	defer release()
	recursive := false
	switch v := r.URL.Query().Get("recursive"); v {
	case "", "false":
	case "true":
		recursive = true
	default:
		s.writeError(w, r, errBadRequest("recursive %q: want true or false", v))
		return
	}
	fw, ok := l.sb.(sandbox.FileWatcher)
	if !ok {
		s.writeError(w, r, fmt.Errorf("watch %q: backend %s cannot watch files: %w", p, l.backend, sandbox.ErrNotSupported))
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-l.gone:
			cancel()
		case <-ctx.Done():
		}
	}()
	evs, err := fw.WatchFiles(ctx, p, recursive)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer evs.Close()
	sw := newStreamWriter(w, acceptsSSE(r))
	sw.start()
	for {
		e, err := evs.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				s.log.Debug("file watch ended", "sandbox", l.sb.ID(), "path", p, "err", err)
			}
			return
		}
		if sw.send("file", api.FileEvent(e)) != nil {
			return
		}
	}
}
