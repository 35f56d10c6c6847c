package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/airlock-dev/airlock/api"
)

// spillWindow is the output of a buffered exec kept in the server's
// memory per stream; the rest (up to MaxOutput) goes to a file on the
// sandbox's own disk volume (its limits.disk), else in the data directory
// above its reserve. A spill that cannot be written is dropped and the
// result says output_truncated. The answer is encoded from there as it
// is sent: a slow reader holds a file, not memory.
const spillWindow = 64 << 10

// spillBuf is one stream of a buffered exec's output.
type spillBuf struct {
	mu        sync.Mutex
	limit     int64 // bytes kept at most (MaxOutput)
	mem       []byte
	f         *diskFile  // unlinked spill file, made on first need
	fn        int64      // bytes in f
	dir       string     // where f is made
	files     *diskFiles // f's volume's (nil: not on one)
	check     func() error
	truncated bool
	failed    bool // the spill failed: what follows is dropped
}

func (b *spillBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if room := b.limit - int64(len(b.mem)) - b.fn; int64(len(p)) > room {
		b.truncated = true
		p = p[:max(room, 0)]
	}
	if room := spillWindow - len(b.mem); room > 0 {
		k := min(room, len(p))
		b.mem = append(b.mem, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || b.failed {
		b.truncated = b.truncated || len(p) > 0
		return n, nil
	}
	if err := b.spill(p); err != nil {
		b.failed, b.truncated = true, true
	}
	return n, nil
}

// spill appends p to the spill file. Under b.mu.
func (b *spillBuf) spill(p []byte) error {
	if b.f == nil {
		f, err := b.files.createTemp(b.dir, ".exec-output-*")
		if err != nil {
			return err
		}
		b.f = f
	}
	if b.check != nil && (b.fn+int64(len(p)))/guardEvery != b.fn/guardEvery {
		if err := b.check(); err != nil {
			return err
		}
	}
	k, err := b.f.WriteAt(p, b.fn)
	b.fn += int64(k)
	return err
}

// reader returns all the stream kept, from memory then the spill.
func (b *spillBuf) reader() io.Reader {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.f == nil {
		return bytes.NewReader(b.mem)
	}
	return io.MultiReader(bytes.NewReader(b.mem), io.NewSectionReader(b.f, 0, b.fn))
}

func (b *spillBuf) isTruncated() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.truncated
}

// detached reports whether b's spill was closed by its volume's detach
// (a pause): what it held is gone.
func (b *spillBuf) detached() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.f != nil && b.f.wasCut()
}

func (b *spillBuf) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.f != nil {
		b.f.Close()
	}
}

// newSpillBufs returns the two streams' buffers of a buffered exec in l.
func (s *Server) newSpillBufs(l *live) (*spillBuf, *spillBuf) {
	mk := func() *spillBuf {
		b := &spillBuf{limit: int64(s.cfg.MaxOutput), dir: s.cfg.DataDir, check: s.storageErr}
		if l.disk != nil && l.disk.vol != nil {
			b.dir, b.check, b.files = l.disk.root, nil, l.disk.serverFiles() // charged to its disk volume
		}
		return b
	}
	return mk(), mk()
}

// writeExecResult writes the api.ExecResult of a buffered exec, its
// output encoded (enc) as it is read from stdout and stderr.
func writeExecResult(w http.ResponseWriter, ex api.ExitStatus, enc string, stdout, stderr io.Reader, dur time.Duration) {
	head, _ := json.Marshal(ex)
	encName, _ := json.Marshal(enc)
	ms, _ := json.Marshal(float64(dur.Microseconds()) / 1000)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := &errWriter{w: w}
	fmt.Fprintf(bw, `%s,"encoding":%s,"stdout":"`, bytes.TrimSuffix(head, []byte("}")), encName)
	err := streamEncoded(bw, stdout, enc)
	if err == nil {
		io.WriteString(bw, `","stderr":"`)
		err = streamEncoded(bw, stderr, enc)
	}
	if err != nil {
		// The output could not be read to its end (its spill was on a
		// volume a pause detached): cut the answer off, so that no
		// client takes what was sent for the whole output.
		panic(http.ErrAbortHandler)
	}
	fmt.Fprintf(bw, `","duration_ms":%s}`+"\n", ms)
}

// errWriter stops writing after the first error (the client went away).
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	var n int
	n, e.err = e.w.Write(p)
	return n, e.err
}

// streamEncoded writes r as the inside of a JSON string: base64 of it,
// or (text) its UTF-8, each run of invalid bytes one U+FFFD. It returns
// an error of r other than its end (the client's going away is w's).
func streamEncoded(w *errWriter, r io.Reader, enc string) error {
	buf := make([]byte, 32<<10)
	var carry []byte
	for w.err == nil {
		n, err := r.Read(buf)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		data := append(carry, buf[:n]...)
		end := err != nil
		cut := len(data)
		if !end {
			cut = encodeCut(data, enc)
		}
		writeJSONChunk(w, data[:cut], enc)
		carry = append([]byte(nil), data[cut:]...)
		if end {
			return nil
		}
	}
	return nil
}

// encodeCut is where data may be cut so that its parts encode as the
// whole does: a multiple of 3 bytes for base64; for text, after the last
// valid rune (an incomplete rune or a run of invalid bytes waits for
// what follows, up to 64 KiB).
func encodeCut(data []byte, enc string) int {
	if enc != "text" {
		return len(data) / 3 * 3
	}
	i := len(data)
	for i > 0 && len(data)-i < 64<<10 {
		r, size := utf8.DecodeLastRune(data[:i])
		if r != utf8.RuneError || size > 1 {
			return i
		}
		i -= size
	}
	return i
}

func writeJSONChunk(w io.Writer, p []byte, enc string) {
	if len(p) == 0 {
		return
	}
	var s string
	if enc == "text" {
		s = strings.ToValidUTF8(string(p), "\uFFFD")
	} else {
		s = base64.StdEncoding.EncodeToString(p)
	}
	q, _ := json.Marshal(s)
	w.Write(q[1 : len(q)-1])
}
