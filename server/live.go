package server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock-dev/airlock/egress"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/admission"
	"github.com/airlock-dev/airlock/server/store"

	"github.com/airlock-dev/airlock/images"
)

// live is a sandbox this server process created and still holds.
type live struct {
	sb        sandbox.Sandbox
	backend   string
	profile   string
	workspace string // host dir of the workspace
	disk      *disk  // the sandbox's files on the host, removed on destroy
	workdir   string // default working directory inside
	memory    int64
	diskUse   int64 // what it counts against its tenant's disk quota (diskquota.go)
	pooled    bool
	proxy     *egress.Proxy         // the sandbox's egress proxy; rules change only through the API
	netless   bool                  // created with network mode none: no in-sandbox egress listener
	protect   *admission.Protection // protected workspace paths, checked before file operations
	image     *images.Rootfs        // the image held for the sandbox (nil: none), released at destroy
	volumes   func()                // releases its named volumes (nil: none), at destroy

	mu        sync.Mutex
	rec       *store.Record // nil while pooled
	procs     map[string]*proc
	nextProc  int
	starting  int // background processes being started (counted against the limit)
	closing   bool
	changedBy string // a change ended it (change.go): "rolled back", "paused"
	expires   time.Time
	keepAlive bool

	life lifeState // pause, resume, checkpoints and keep-alive-while (pause.go); under mu

	lastUse atomic.Int64 // unix nanos of the last API use
	busy    atomic.Int32 // requests in flight
	gone    chan struct{}
}

func newLive(sb sandbox.Sandbox, backend, profile, workspace, workdir string, memory int64) *live {
	l := &live{sb: sb, backend: backend, profile: profile, workspace: workspace, workdir: workdir,
		memory: memory, procs: map[string]*proc{}, gone: make(chan struct{})}
	l.touch()
	return l
}

func (l *live) touch() { l.lastUse.Store(time.Now().UnixNano()) }

// use marks the sandbox busy for the duration of a request.
func (l *live) use() func() {
	l.busy.Add(1)
	l.touch()
	return func() { l.touch(); l.busy.Add(-1) }
}

func (l *live) tenant() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rec == nil {
		return ""
	}
	return l.rec.Tenant
}

func (l *live) runningProcs() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runningProcsLocked()
}

// runningProcsLocked is runningProcs with l.mu held.
func (l *live) runningProcsLocked() int {
	n := 0
	for _, p := range l.procs {
		select {
		case <-p.done:
		default:
			n++
		}
	}
	return n
}

// killProcs ends every background process (the sandbox is going away).
func (l *live) killProcs() {
	l.mu.Lock()
	ps := make([]*proc, 0, len(l.procs))
	for _, p := range l.procs {
		ps = append(ps, p)
	}
	l.mu.Unlock()
	for _, p := range ps {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = p.p.Kill(ctx)
		cancel()
		p.closeStdin()
	}
}
