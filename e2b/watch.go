package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/e2b/envdpb"
)

// opTypes maps /v1's watch operations to envd's event types.
var opTypes = map[string]envdpb.EventType{
	"create": envdpb.EventType_EVENT_TYPE_CREATE,
	"write":  envdpb.EventType_EVENT_TYPE_WRITE,
	"remove": envdpb.EventType_EVENT_TYPE_REMOVE,
	"rename": envdpb.EventType_EVENT_TYPE_RENAME,
	"chmod":  envdpb.EventType_EVENT_TYPE_CHMOD,
}

// openWatch checks dir (a directory that exists) and starts a /v1 watch.
func (f *fsSvc) openWatch(ctx context.Context, sc *scope, dir string, recursive bool) (*client.FileWatch, error) {
	e, err := f.stat(ctx, sc, dir)
	if err != nil {
		return nil, err
	}
	if e.Type != envdpb.FileType_FILE_TYPE_DIRECTORY {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path '%s' is not a directory", dir))
	}
	w, err := sc.c.WatchFiles(ctx, sc.id, dir, recursive)
	if err != nil {
		return nil, rpcErr(ctx, sc, err)
	}
	return w, nil
}

// event is envd's event for /v1 event ev under dir (nil: none to send).
func (f *fsSvc) event(ctx context.Context, sc *scope, dir string, ev api.FileEvent, withEntry bool) *envdpb.FilesystemEvent {
	t, ok := opTypes[ev.Op]
	if !ok || ev.Path == "" || isUploadTemp(ev.Path) {
		return nil
	}
	if t == envdpb.EventType_EVENT_TYPE_RENAME && isUploadTemp(ev.From) {
		// /v1's upload writes a hidden sibling and renames it into place;
		// envd writes the file itself, and its watchers see a write.
		t = envdpb.EventType_EVENT_TYPE_WRITE
	}
	name := strings.TrimPrefix(strings.TrimPrefix(ev.Path, dir), "/")
	out := &envdpb.FilesystemEvent{Name: name, Type: t}
	if withEntry && (t == envdpb.EventType_EVENT_TYPE_CREATE || t == envdpb.EventType_EVENT_TYPE_WRITE || t == envdpb.EventType_EVENT_TYPE_CHMOD) {
		if fi, err := sc.c.Stat(ctx, sc.id, ev.Path); err == nil {
			out.Entry = f.entry(ctx, sc, path.Clean(ev.Path), fi)
		}
	}
	return out
}

// isUploadTemp reports whether p is the hidden sibling an upload (/files)
// is written to before it is renamed into place.
func isUploadTemp(p string) bool {
	return p != "" && strings.HasPrefix(path.Base(p), api.UploadTempPrefix)
}

func (f *fsSvc) WatchDir(ctx context.Context, req *connect.Request[envdpb.WatchDirRequest], st *connect.ServerStream[envdpb.WatchDirResponse]) error {
	sc := scopeOf(ctx)
	dir := sc.resolve(req.Msg.Path)
	w, err := f.openWatch(ctx, sc, dir, req.Msg.Recursive)
	if err != nil {
		return err
	}
	defer w.Close()
	var mu sync.Mutex
	last := time.Now()
	send := func(r *envdpb.WatchDirResponse) error {
		mu.Lock()
		defer mu.Unlock()
		last = time.Now()
		return st.Send(r)
	}
	if err := send(&envdpb.WatchDirResponse{Event: &envdpb.WatchDirResponse_Start{Start: &envdpb.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	every := keepalive(req.Header())
	go func() {
		t := time.NewTicker(every / 2)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				w.Close() // ends Next below
				return
			case <-t.C:
				mu.Lock()
				quiet := time.Since(last) >= every
				mu.Unlock()
				if quiet {
					send(&envdpb.WatchDirResponse{Event: &envdpb.WatchDirResponse_Keepalive{Keepalive: &envdpb.WatchDirResponse_KeepAlive{}}})
				}
			}
		}
	}()
	for {
		ev, err := w.Next()
		if err != nil {
			if ctx.Err() != nil {
				return rpcErr(ctx, sc, ctx.Err())
			}
			if errors.Is(err, io.EOF) {
				if _, ok := sc.running(context.WithoutCancel(ctx)); !ok {
					abort()
				}
				return nil
			}
			return rpcErr(ctx, sc, err)
		}
		if fe := f.event(ctx, sc, dir, ev, req.Msg.IncludeEntry); fe != nil {
			if err := send(&envdpb.WatchDirResponse{Event: &envdpb.WatchDirResponse_Filesystem{Filesystem: fe}}); err != nil {
				return err
			}
		}
	}
}

// watchers are the polling watches (CreateWatcher / GetWatcherEvents /
// RemoveWatcher), each a /v1 watch whose events queue until drained.
type watchers struct {
	mu sync.Mutex
	m  map[string]*pollWatch
}

type pollWatch struct {
	sandbox string
	w       *client.FileWatch
	mu      sync.Mutex
	events  []*envdpb.FilesystemEvent
	err     error
}

// Bounds of the polling watches.
const (
	maxPollWatches = 1024
	maxPollEvents  = 4096
)

func (f *fsSvc) CreateWatcher(ctx context.Context, req *connect.Request[envdpb.CreateWatcherRequest]) (*connect.Response[envdpb.CreateWatcherResponse], error) {
	sc := scopeOf(ctx)
	dir := sc.resolve(req.Msg.Path)
	f.watchers.mu.Lock()
	n := len(f.watchers.m)
	f.watchers.mu.Unlock()
	if n >= maxPollWatches {
		return nil, connect.NewError(connect.CodeResourceExhausted, errors.New("too many watchers"))
	}
	// The watch outlives this call; RemoveWatcher (or the sandbox's end) ends it.
	bg := context.WithoutCancel(ctx)
	w, err := f.openWatch(bg, sc, dir, req.Msg.Recursive)
	if err != nil {
		return nil, err
	}
	var b [8]byte
	rand.Read(b[:])
	id := "w" + hex.EncodeToString(b[:])
	pw := &pollWatch{sandbox: sc.id, w: w}
	f.watchers.mu.Lock()
	if f.watchers.m == nil {
		f.watchers.m = map[string]*pollWatch{}
	}
	f.watchers.m[id] = pw
	f.watchers.mu.Unlock()
	go func() {
		for {
			ev, err := w.Next()
			pw.mu.Lock()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					pw.err = err
				}
				pw.mu.Unlock()
				return
			}
			if fe := f.event(bg, sc, dir, ev, req.Msg.IncludeEntry); fe != nil && len(pw.events) < maxPollEvents {
				pw.events = append(pw.events, fe)
			}
			pw.mu.Unlock()
		}
	}()
	return connect.NewResponse(&envdpb.CreateWatcherResponse{WatcherId: id}), nil
}

func (f *fsSvc) watcher(sc *scope, id string) (*pollWatch, error) {
	f.watchers.mu.Lock()
	defer f.watchers.mu.Unlock()
	pw := f.watchers.m[id]
	if pw == nil || pw.sandbox != sc.id {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher %s not found", id))
	}
	return pw, nil
}

func (f *fsSvc) GetWatcherEvents(ctx context.Context, req *connect.Request[envdpb.GetWatcherEventsRequest]) (*connect.Response[envdpb.GetWatcherEventsResponse], error) {
	pw, err := f.watcher(scopeOf(ctx), req.Msg.WatcherId)
	if err != nil {
		return nil, err
	}
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if pw.err != nil {
		return nil, connect.NewError(connect.CodeInternal, pw.err)
	}
	out := &envdpb.GetWatcherEventsResponse{Events: pw.events}
	pw.events = nil
	return connect.NewResponse(out), nil
}

func (f *fsSvc) RemoveWatcher(ctx context.Context, req *connect.Request[envdpb.RemoveWatcherRequest]) (*connect.Response[envdpb.RemoveWatcherResponse], error) {
	pw, err := f.watcher(scopeOf(ctx), req.Msg.WatcherId)
	if err != nil {
		return nil, err
	}
	pw.w.Close()
	f.watchers.mu.Lock()
	delete(f.watchers.m, req.Msg.WatcherId)
	f.watchers.mu.Unlock()
	return connect.NewResponse(&envdpb.RemoveWatcherResponse{}), nil
}
