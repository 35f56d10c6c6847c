package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"path"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/sandbox"
)

// Files returns the guest's filesystem API. Paths must be absolute, clean
// and NUL-free; the host checks them before sending, the guest again before
// resolving them inside its root.
func (c *Client) Files() sandbox.Files { return files{c} }

type files struct{ c *Client }

// ReadFile streams a file. ctx bounds the whole read, not just the open.
// The reader holds at most one frame (1 MiB) in memory; bound the total with
// io.LimitReader.
func (f files) ReadFile(ctx context.Context, p string) (io.ReadCloser, error) {
	op := fmt.Sprintf("read file %q", truncate(p, 256))
	if err := checkPath(p); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	st, _, err := f.c.roundTrip(ctx, op, &request{Op: opRead, Path: p})
	if err != nil {
		return nil, err
	}
	return &fileReader{c: f.c, ctx: ctx, op: op, st: st, fr: newFrameReader(st, MaxFramePayload), stop: bindContext(ctx, st)}, nil
}

type fileReader struct {
	c    *Client
	ctx  context.Context
	op   string
	st   *yamux.Stream
	fr   *frameReader
	stop func() bool
	buf  []byte
	err  error
}

func (r *fileReader) Read(b []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		typ, payload, err := r.fr.next()
		if err != nil {
			r.err = r.c.wrapErr(r.ctx, r.op, err)
			break
		}
		switch typ {
		case frameData:
			r.buf = payload
		case frameEnd:
			r.err = io.EOF
		case frameError:
			var we wireError
			if json.Unmarshal(payload, &we) != nil {
				r.err = r.c.wrapErr(r.ctx, r.op, fmt.Errorf("bad error frame: %w", errProtocol))
			} else {
				r.err = fmt.Errorf("%s: %w", r.op, fromWire(&we))
			}
		default:
			r.err = r.c.wrapErr(r.ctx, r.op, fmt.Errorf("unexpected frame %q: %w", typ, errProtocol))
		}
	}
	if len(r.buf) == 0 {
		// Done (EOF or error): release the stream now, Close stays valid.
		r.stop()
		r.st.Close()
		return 0, r.err
	}
	n := copy(b, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// Close stops the transfer; the guest notices and stops sending.
func (r *fileReader) Close() error {
	r.stop()
	r.st.Close()
	if r.err == nil {
		r.err = fmt.Errorf("%s: reader closed: %w", r.op, fs.ErrClosed)
	}
	r.buf = nil
	return nil
}

// WriteFile creates or truncates p with mode (permission bits; 0 means
// 0644) and fills it from r, creating parent directories when mkdirs is set.
func (f files) WriteFile(ctx context.Context, p string, r io.Reader, mode fs.FileMode, mkdirs bool) error {
	op := fmt.Sprintf("write file %q", truncate(p, 256))
	if err := checkPath(p); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if p == "/" {
		return fmt.Errorf("%s: is the root directory: %w", op, sandbox.ErrInvalid)
	}
	if mode&^fs.ModePerm != 0 {
		return fmt.Errorf("%s: mode %#o has more than permission bits (0-0777): %w", op, uint32(mode), sandbox.ErrInvalid)
	}
	if mode == 0 {
		mode = 0o644
	}
	st, err := f.c.open(ctx, op, &request{Op: opWrite, Path: p, Mode: uint32(mode), Parents: mkdirs})
	if err != nil {
		return err
	}
	defer st.Close()
	stop := bindContext(ctx, st)
	defer stop()

	// The guest answers once it has written everything, or early with an
	// error; an early answer stops our sending.
	type result struct {
		resp response
		err  error
	}
	respc := make(chan result, 1)
	go func() {
		var res result
		res.err = readHeader(st, &res.resp, MaxResponseHeader)
		if res.err != nil || res.resp.Error != nil {
			st.SetWriteDeadline(time.Unix(1, 0))
		}
		respc <- res
	}()

	var sendErr error
	if r != nil {
		buf := make([]byte, chunkSize)
		for {
			n, rerr := r.Read(buf)
			if n > 0 {
				if err := writeFrame(st, frameData, buf[:n]); err != nil {
					sendErr = err
					break
				}
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				// Tell the guest to discard; report the reader's error.
				writeJSONFrame(st, frameError, toWire(rerr))
				<-respc
				return fmt.Errorf("%s: read source: %w", op, rerr)
			}
		}
	}
	if sendErr == nil {
		sendErr = writeFrame(st, frameEnd, nil)
	}
	res := <-respc
	if res.err != nil {
		return f.c.wrapErr(ctx, op, res.err)
	}
	if res.resp.Error != nil {
		return fmt.Errorf("%s: %w", op, fromWire(res.resp.Error))
	}
	if sendErr != nil {
		return f.c.wrapErr(ctx, op, sendErr)
	}
	f.c.emit(audit.TypeFile, "write", map[string]any{"path": p, "mode": fmt.Sprintf("%#o", uint32(mode))})
	return nil
}

// Stat describes p without following a final symlink (Link holds its target).
func (f files) Stat(ctx context.Context, p string) (sandbox.FileInfo, error) {
	op := fmt.Sprintf("stat %q", truncate(p, 256))
	if err := checkPath(p); err != nil {
		return sandbox.FileInfo{}, fmt.Errorf("%s: %w", op, err)
	}
	st, resp, err := f.c.roundTrip(ctx, op, &request{Op: opStat, Path: p})
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	st.Close()
	if resp.Info == nil {
		return sandbox.FileInfo{}, f.c.wrapErr(ctx, op, fmt.Errorf("stat without info: %w", errProtocol))
	}
	name := path.Base(p)
	return toFileInfo(resp.Info, name, p), nil
}

// List returns the entries of directory p (at most MaxListEntries, else an
// error wrapping ErrLimit), in the order the guest's filesystem gives them.
func (f files) List(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	op := fmt.Sprintf("list %q", truncate(p, 256))
	if err := checkPath(p); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	st, _, err := f.c.roundTrip(ctx, op, &request{Op: opList, Path: p})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	stop := bindContext(ctx, st)
	defer stop()
	fr := newFrameReader(st, MaxFramePayload)
	var out []sandbox.FileInfo
	size := 0 // bytes held for the listing, bounded by MaxListBytes
	for {
		typ, payload, err := fr.next()
		if err != nil {
			return nil, f.c.wrapErr(ctx, op, err)
		}
		switch typ {
		case frameEntries:
			var ents []wireFileInfo
			if err := json.Unmarshal(payload, &ents); err != nil {
				return nil, f.c.wrapErr(ctx, op, fmt.Errorf("bad entries: %w", errProtocol))
			}
			if len(out)+len(ents) > MaxListEntries {
				return nil, fmt.Errorf("%s: more than %d entries: %w", op, MaxListEntries, sandbox.ErrLimit)
			}
			for i := range ents {
				if err := checkName(ents[i].Name); err != nil {
					return nil, f.c.wrapErr(ctx, op, err)
				}
				size += listEntryOverhead + 2*len(ents[i].Name) + len(p) + len(ents[i].Link)
				for k, v := range ents[i].Meta {
					size += len(k) + len(v)
				}
				if size > MaxListBytes {
					return nil, fmt.Errorf("%s: listing larger than %d bytes: %w", op, MaxListBytes, sandbox.ErrLimit)
				}
				out = append(out, toFileInfo(&ents[i], ents[i].Name, path.Join(p, ents[i].Name)))
			}
		case frameEnd:
			return out, nil
		case frameError:
			var we wireError
			if json.Unmarshal(payload, &we) != nil {
				return nil, f.c.wrapErr(ctx, op, fmt.Errorf("bad error frame: %w", errProtocol))
			}
			return nil, fmt.Errorf("%s: %w", op, fromWire(&we))
		default:
			return nil, f.c.wrapErr(ctx, op, fmt.Errorf("unexpected frame %q: %w", typ, errProtocol))
		}
	}
}

// Mkdir creates directory p (and its parents when parents is set; then an
// existing directory is not an error).
func (f files) Mkdir(ctx context.Context, p string, mode fs.FileMode, parents bool) error {
	op := fmt.Sprintf("mkdir %q", truncate(p, 256))
	if mode&^fs.ModePerm != 0 {
		return fmt.Errorf("%s: mode %#o has more than permission bits (0-0777): %w", op, uint32(mode), sandbox.ErrInvalid)
	}
	if mode == 0 {
		mode = 0o755
	}
	return f.simple(ctx, op, &request{Op: opMkdir, Path: p, Mode: uint32(mode), Parents: parents}, "mkdir")
}

// Remove deletes p; a non-empty directory only when recursive is set.
// Symlinks are removed, never followed.
func (f files) Remove(ctx context.Context, p string, recursive bool) error {
	op := fmt.Sprintf("remove %q", truncate(p, 256))
	if p == "/" {
		return fmt.Errorf("%s: is the root directory: %w", op, sandbox.ErrInvalid)
	}
	return f.simple(ctx, op, &request{Op: opRemove, Path: p, Recursive: recursive}, "remove")
}

// Rename moves from to to (replacing a file at to, like rename(2)).
func (f files) Rename(ctx context.Context, from, to string) error {
	op := fmt.Sprintf("rename %q", truncate(from, 256))
	if err := checkPath(to); err != nil {
		return fmt.Errorf("%s: target: %w", op, err)
	}
	if from == "/" || to == "/" {
		return fmt.Errorf("%s: the root directory cannot be renamed: %w", op, sandbox.ErrInvalid)
	}
	return f.simple(ctx, op, &request{Op: opRename, Path: from, To: to}, "rename")
}

func (f files) simple(ctx context.Context, op string, req *request, what string) error {
	if err := checkPath(req.Path); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	st, _, err := f.c.roundTrip(ctx, op, req)
	if err != nil {
		return err
	}
	st.Close()
	fields := map[string]any{"path": req.Path}
	if req.To != "" {
		fields["to"] = req.To
	}
	if req.Recursive {
		fields["recursive"] = true
	}
	f.c.emit(audit.TypeFile, what, fields)
	return nil
}

func toFileInfo(w *wireFileInfo, name, p string) sandbox.FileInfo {
	mode := fs.FileMode(w.Mode)
	link := w.Link
	if len(link) > MaxPathLen {
		link = link[:MaxPathLen]
	}
	size := w.Size
	if size < 0 {
		size = 0
	}
	return sandbox.FileInfo{
		Name:    name,
		Path:    p,
		Size:    size,
		Mode:    mode,
		ModTime: time.Unix(0, w.ModTime).UTC(),
		IsDir:   mode.IsDir(),
		Link:    link,
		Owner:   &sandbox.FileOwner{UID: int(w.UID), GID: int(w.GID), User: boundName(w.Owner), Group: boundName(w.Group)},
		// The guest's claim, kept only when within the rules and bounds.
		Metadata: boundMeta(w.Meta),
	}
}

// boundMeta is metadata from the guest, dropped whole unless it passes
// sandbox.CheckMetadata.
func boundMeta(m map[string]string) map[string]string {
	if len(m) == 0 || sandbox.CheckMetadata(m) != nil {
		return nil
	}
	return m
}

// SetMetadata replaces the metadata of p (see sandbox.MetadataFiles).
func (f files) SetMetadata(ctx context.Context, p string, m map[string]string) error {
	op := fmt.Sprintf("set metadata of %q", truncate(p, 256))
	if err := sandbox.CheckMetadata(m); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := f.simple(ctx, op, &request{Op: opSetMeta, Path: p, Meta: m}, "set metadata"); err != nil {
		return err
	}
	return nil
}

// boundName is a user or group name from the guest, dropped when longer
// than a name can be.
func boundName(s string) string {
	if len(s) > 256 {
		return ""
	}
	return s
}
