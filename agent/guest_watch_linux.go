package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"strconv"
	"sync"
	"unsafe"

	"github.com/hashicorp/yamux"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/sandbox"
)

const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

// fsWatch is one watch stream: an inotify instance and what its watch
// descriptors stand for. It runs on the file operation's thread (the
// sandbox user's fs ids), so watches need the user's read permission.
type fsWatch struct {
	g         *guest
	fd        int
	recursive bool
	wds       map[int]string // watch descriptor -> sandbox path
	full      bool           // MaxWatches reached
	top       int            // the watch descriptor of the path asked for
	q         *eventQueue
}

func (g *guest) watch(st *yamux.Stream, req *request) {
	g.mu.Lock()
	if g.watches >= MaxWatchStreams {
		g.mu.Unlock()
		respondErr(st, fmt.Errorf("watch: %d streams already open: %w", MaxWatchStreams, sandbox.ErrLimit))
		return
	}
	g.watches++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.watches--
		g.mu.Unlock()
	}()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		respondErr(st, fmt.Errorf("watch: inotify: %w", errnoKind(err)))
		return
	}
	defer unix.Close(fd)
	w := &fsWatch{g: g, fd: fd, recursive: req.Recursive, wds: map[int]string{}, q: newEventQueue()}
	if err := w.add(req.Path, true); err != nil {
		respondErr(st, err)
		return
	}
	if err := respond(st, &response{}); err != nil {
		return
	}
	// The host ends the watch by closing its side: wake the poll.
	var wake [2]int
	if err := unix.Pipe2(wake[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return
	}
	defer unix.Close(wake[0])
	var closeOnce sync.Once
	closeWake := func() { closeOnce.Do(func() { unix.Close(wake[1]) }) }
	defer closeWake()
	go func() {
		var b [1]byte
		for {
			if _, err := st.Read(b[:]); err != nil {
				closeWake()
				return
			}
		}
	}()
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		w.q.drain(st)
		closeWake() // the host stopped taking events
	}()
	w.loop(wake[0])
	w.q.close()
	<-sent
}

// loop reads inotify events until the host leaves or nothing is watched.
func (w *fsWatch) loop(wake int) {
	buf := make([]byte, 64<<10)
	for len(w.wds) > 0 {
		fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}, {Fd: int32(wake), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		n, err := unix.Read(w.fd, buf)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return
		}
		w.batch(buf[:n])
	}
}

// batch turns one read of raw events into FileEvents: renames paired by
// cookie, back-to-back writes to one path merged.
func (w *fsWatch) batch(b []byte) {
	type moved struct {
		path string
		dir  bool
	}
	from := map[uint32]moved{}
	var out []wireEvent
	emit := func(e wireEvent) {
		if e.Op == sandbox.FileWrite && len(out) > 0 && out[len(out)-1] == e {
			return
		}
		out = append(out, e)
	}
	for len(b) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(b) {
			break
		}
		name := string(bytes.TrimRight(b[unix.SizeofInotifyEvent:end], "\x00"))
		b = b[end:]
		if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
			emit(wireEvent{Op: sandbox.FileOverflow})
			continue
		}
		dirPath, ok := w.wds[int(ev.Wd)]
		if !ok {
			continue
		}
		if ev.Mask&unix.IN_IGNORED != 0 {
			delete(w.wds, int(ev.Wd))
			continue
		}
		p := dirPath
		if name != "" {
			p = path.Join(dirPath, name)
		}
		isDir := ev.Mask&unix.IN_ISDIR != 0
		switch {
		case ev.Mask&unix.IN_CREATE != 0:
			emit(wireEvent{Op: sandbox.FileCreate, Path: p, Dir: isDir})
			if isDir && w.recursive {
				w.add(p, false)
			}
		case ev.Mask&unix.IN_MODIFY != 0:
			emit(wireEvent{Op: sandbox.FileWrite, Path: p})
		case ev.Mask&unix.IN_DELETE != 0:
			emit(wireEvent{Op: sandbox.FileRemove, Path: p, Dir: isDir})
		case ev.Mask&unix.IN_MOVED_FROM != 0:
			from[ev.Cookie] = moved{p, isDir}
		case ev.Mask&unix.IN_MOVED_TO != 0:
			if m, ok := from[ev.Cookie]; ok {
				delete(from, ev.Cookie)
				emit(wireEvent{Op: sandbox.FileRename, Path: p, From: m.path, Dir: isDir})
				w.renamed(m.path, p)
			} else {
				emit(wireEvent{Op: sandbox.FileCreate, Path: p, Dir: isDir})
				if isDir && w.recursive {
					w.add(p, false)
				}
			}
		case ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 && name == "" && dirPath != "" && int(ev.Wd) == w.top:
			emit(wireEvent{Op: sandbox.FileRemove, Path: p, Dir: isDir})
			unix.InotifyRmWatch(w.fd, uint32(ev.Wd))
			delete(w.wds, int(ev.Wd))
			if ev.Mask&unix.IN_MOVE_SELF != 0 {
				w.wds = map[int]string{} // the tree moved away: the watch ends
			}
		}
	}
	for _, m := range from { // moved out of the watched tree
		emit(wireEvent{Op: sandbox.FileRemove, Path: m.path, Dir: m.dir})
	}
	for _, e := range out {
		w.q.put(e)
	}
}

// renamed rewrites the paths of watched directories below a renamed one.
func (w *fsWatch) renamed(from, to string) {
	for wd, p := range w.wds {
		if p == from || len(p) > len(from) && p[:len(from)] == from && p[len(from)] == '/' {
			w.wds[wd] = to + p[len(from):]
		}
	}
}

// add watches p (resolved inside the root) and, recursively, the
// directories below it. Only the top's errors are reported.
func (w *fsWatch) add(p string, top bool) error {
	if len(w.wds) >= MaxWatches {
		if !w.full {
			w.full = true
			w.q.put(wireEvent{Op: sandbox.FileOverflow})
		}
		return nil
	}
	// The path asked for resolves as the sandbox sees it (a final
	// symlink too, inside the root); entries below are never followed.
	flags := unix.O_PATH
	if !top {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := w.g.root.open(p, flags, 0)
	if err != nil {
		if top {
			return fmt.Errorf("watch %q: %w", p, err)
		}
		return nil
	}
	defer unix.Close(fd)
	var s unix.Stat_t
	if err := unix.Fstat(fd, &s); err != nil {
		return fmt.Errorf("watch %q: %w", p, errnoKind(err))
	}
	isDir := s.Mode&unix.S_IFMT == unix.S_IFDIR
	if s.Mode&unix.S_IFMT == unix.S_IFLNK {
		return nil // swapped for a symlink meanwhile: not followed
	}
	// inotify takes a path: the descriptor's own, so that nothing is
	// resolved again (a symlink swapped in meanwhile is not followed).
	wd, err := unix.InotifyAddWatch(w.fd, "/proc/self/fd/"+strconv.Itoa(fd), watchMask)
	if err != nil {
		if top {
			return fmt.Errorf("watch %q: inotify: %w", p, errnoKind(err))
		}
		return nil
	}
	if _, ok := w.wds[wd]; !ok {
		w.wds[wd] = p
	}
	if top {
		w.top = wd
	}
	if !isDir || !w.recursive {
		return nil
	}
	dfd, err := w.g.root.open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(dfd), p)
	defer f.Close()
	for {
		ents, err := f.ReadDir(256)
		for _, e := range ents {
			if e.IsDir() {
				w.add(path.Join(p, e.Name()), false)
			}
		}
		if err != nil || len(ents) == 0 {
			return nil
		}
	}
}

// eventQueue holds at most maxQueuedEvents events between the inotify
// reader and the stream writer; past that it drops them and queues one
// overflow event when there is room again.
type eventQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	evs     []wireEvent
	dropped bool
	closed  bool
}

func newEventQueue() *eventQueue {
	q := &eventQueue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *eventQueue) put(e wireEvent) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.evs) >= maxQueuedEvents {
		q.dropped = true
		return
	}
	if q.dropped {
		q.dropped = false
		q.evs = append(q.evs, wireEvent{Op: sandbox.FileOverflow})
	}
	q.evs = append(q.evs, e)
	q.cond.Signal()
}

func (q *eventQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Signal()
	q.mu.Unlock()
}

// drain writes queued events to st in batches until closed (then it sends
// the end frame) or a write fails.
func (q *eventQueue) drain(st *yamux.Stream) {
	for {
		q.mu.Lock()
		for len(q.evs) == 0 && !q.closed {
			q.cond.Wait()
		}
		n := min(len(q.evs), maxEventBatch)
		batch := append([]wireEvent(nil), q.evs[:n]...)
		q.evs = q.evs[n:]
		closed := q.closed && len(q.evs) == 0
		q.mu.Unlock()
		if len(batch) > 0 {
			b, _ := json.Marshal(batch)
			if writeFrame(st, frameEvents, b) != nil {
				return
			}
		}
		if closed {
			writeFrame(st, frameEnd, nil)
			return
		}
	}
}
