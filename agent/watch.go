package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/hashicorp/yamux"

	"github.com/airlock-dev/airlock/sandbox"
)

// Bounds of the watch operation (guest side; the host checks what comes).
const (
	// MaxWatchStreams bounds the watch streams one guest keeps open.
	MaxWatchStreams = 16
	// MaxWatches bounds the inotify watches (directories) of one stream:
	// a recursive watch of a larger tree watches the first ones and says
	// overflow.
	MaxWatches = 4096
	// maxQueuedEvents bounds the events the guest holds for a host that
	// does not read; more are dropped and an overflow event follows.
	maxQueuedEvents = 1024
	// maxEventBatch bounds the events of one frame.
	maxEventBatch = 256
)

// wireEvent is the wire form of sandbox.FileEvent.
type wireEvent struct {
	Op   string `json:"op"`
	Path string `json:"path,omitempty"`
	From string `json:"from,omitempty"`
	Dir  bool   `json:"dir,omitempty"`
}

// checkEvent validates one event from the guest.
func checkEvent(e *wireEvent) error {
	switch e.Op {
	case sandbox.FileOverflow:
		if e.Path != "" || e.From != "" {
			return fmt.Errorf("overflow event with a path: %w", errProtocol)
		}
		return nil
	case sandbox.FileCreate, sandbox.FileWrite, sandbox.FileRemove:
		if e.From != "" {
			return fmt.Errorf("%s event with a from path: %w", e.Op, errProtocol)
		}
	case sandbox.FileRename:
		if err := checkPath(e.From); err != nil {
			return fmt.Errorf("rename event: %v: %w", err, errProtocol)
		}
	default:
		return fmt.Errorf("unknown event %q: %w", truncate(e.Op, 32), errProtocol)
	}
	if err := checkPath(e.Path); err != nil {
		return fmt.Errorf("%s event: %v: %w", e.Op, err, errProtocol)
	}
	return nil
}

// Watch starts watching p (recursive: its whole tree) inside the guest
// and returns once the guest watches it. See sandbox.FileWatcher.
func (c *Client) Watch(ctx context.Context, p string, recursive bool) (sandbox.FileEvents, error) {
	op := fmt.Sprintf("watch %q", truncate(p, 256))
	if err := checkPath(p); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	st, _, err := c.roundTrip(ctx, op, &request{Op: opWatch, Path: p, Recursive: recursive})
	if err != nil {
		return nil, err
	}
	return &watchStream{c: c, ctx: ctx, op: op, st: st, stop: bindContext(ctx, st), fr: newFrameReader(st, MaxFramePayload)}, nil
}

type watchStream struct {
	c    *Client
	ctx  context.Context
	op   string
	st   *yamux.Stream
	stop func() bool
	fr   *frameReader
	evs  []wireEvent // received, not yet returned
	err  error
}

func (w *watchStream) Close() error {
	w.stop()
	return w.st.Close()
}

// Next returns the next event; io.EOF once the watched path went away.
func (w *watchStream) Next() (sandbox.FileEvent, error) {
	for len(w.evs) == 0 && w.err == nil {
		w.err = w.read()
	}
	if len(w.evs) > 0 {
		e := w.evs[0]
		w.evs = w.evs[1:]
		return sandbox.FileEvent(e), nil
	}
	return sandbox.FileEvent{}, w.err
}

func (w *watchStream) read() error {
	typ, payload, err := w.fr.next()
	if err != nil {
		return w.c.wrapErr(w.ctx, w.op, err)
	}
	switch typ {
	case frameEvents:
		var evs []wireEvent
		if err := json.Unmarshal(payload, &evs); err != nil || len(evs) > maxEventBatch {
			return w.c.wrapErr(w.ctx, w.op, fmt.Errorf("bad events frame: %w", errProtocol))
		}
		for i := range evs {
			if err := checkEvent(&evs[i]); err != nil {
				return w.c.wrapErr(w.ctx, w.op, err)
			}
		}
		w.evs = evs
		return nil
	case frameEnd:
		return io.EOF
	case frameError:
		var we wireError
		if json.Unmarshal(payload, &we) != nil {
			return w.c.wrapErr(w.ctx, w.op, fmt.Errorf("bad error frame: %w", errProtocol))
		}
		return fmt.Errorf("%s: %w", w.op, fromWire(&we))
	default:
		return w.c.wrapErr(w.ctx, w.op, fmt.Errorf("unexpected frame %q: %w", typ, errProtocol))
	}
}
