package server

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/sandbox"
)

// A server file the detach closed answers errDetached (a closed sandbox),
// to its reader and writer alike, and no new one is made on the volume.
func TestDiskFilesClosedByDetach(t *testing.T) {
	t.Parallel()
	var files diskFiles
	f, err := files.createTemp(t.TempDir(), ".spool-*")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("data")); err != nil {
		t.Fatal(err)
	}
	files.close()
	if _, err := f.Write([]byte("more")); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("write after the detach: %v, want a closed sandbox", err)
	}
	if _, err := f.ReadAt(make([]byte, 4), 0); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("read after the detach: %v, want a closed sandbox", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close after the detach: %v", err)
	}
	if _, err := files.createTemp(t.TempDir(), ".spool-*"); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("a new file on a detached volume: %v", err)
	}
	var none *diskFiles // not on a volume: a plain file
	g, err := none.createTemp(t.TempDir(), ".spool-*")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil || g.f.Close() == nil {
		t.Fatalf("close of a plain spool: %v", err)
	}
}

// An exec's output that cannot be read to its end (its spill was closed
// by a pause) cuts the answer off instead of sending it as complete.
func TestExecResultCutWhenOutputUnreadable(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	defer func() {
		if r := recover(); r != http.ErrAbortHandler {
			t.Fatalf("recovered %v, want http.ErrAbortHandler", r)
		}
		if strings.Contains(rec.Body.String(), "duration_ms") {
			t.Fatalf("a complete answer was written: %s", rec.Body)
		}
	}()
	writeExecResult(rec, api.ExitStatus{}, "text", strings.NewReader("partial"), iotest.ErrReader(errDetached), 0)
	t.Fatal("writeExecResult returned")
}

// An exec's output spilled to a volume the pause detached is known lost:
// the exec answers the pause (409), not a result missing its output.
func TestSpillDetachedByPause(t *testing.T) {
	t.Parallel()
	var files diskFiles
	b := &spillBuf{limit: 1 << 20, dir: t.TempDir(), files: &files}
	defer b.close()
	if _, err := b.Write(make([]byte, spillWindow+1)); err != nil {
		t.Fatal(err)
	}
	if b.detached() {
		t.Fatal("detached before the detach")
	}
	files.close()
	if !b.detached() {
		t.Fatal("a spill closed by the detach is not reported detached")
	}
	if _, err := io.ReadAll(b.reader()); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("reading a detached spill: %v, want a closed sandbox", err)
	}
}
