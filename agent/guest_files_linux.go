package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/hashicorp/yamux"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/sandbox"
)

// maxRemoveDepth bounds recursive removal (and so the descriptors it holds).
const maxRemoveDepth = 512

// watchHost makes writes on st fail as soon as the host closes its side,
// so a transfer the host abandoned stops.
func watchHost(st *yamux.Stream) {
	go func() {
		io.Copy(io.Discard, st)
		st.SetWriteDeadline(time.Unix(1, 0))
	}()
}

func (g *guest) readFile(st *yamux.Stream, req *request) {
	// O_NONBLOCK: opening a FIFO must not hang the agent.
	fd, err := g.root.open(req.Path, unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		respondErr(st, err)
		return
	}
	f := os.NewFile(uintptr(fd), req.Path)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		respondErr(st, errnoKind(err))
		return
	}
	if !fi.Mode().IsRegular() {
		respondErr(st, fmt.Errorf("%s is not a regular file: %w", req.Path, sandbox.ErrInvalid))
		return
	}
	if err := respond(st, &response{}); err != nil {
		return
	}
	watchHost(st)
	buf := make([]byte, chunkSize)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if writeFrame(st, frameData, buf[:n]) != nil {
				return
			}
		}
		if err == io.EOF {
			writeFrame(st, frameEnd, nil)
			return
		}
		if err != nil {
			writeJSONFrame(st, frameError, toWire(errnoKind(err)))
			return
		}
	}
}

func (g *guest) writeFile(st *yamux.Stream, req *request) {
	mode := req.Mode & 0o777
	if req.Path == "/" {
		respondErr(st, fmt.Errorf("cannot write the root directory: %w", sandbox.ErrInvalid))
		return
	}
	if req.Parents {
		if err := g.mkdirAll(path.Dir(req.Path), 0o755); err != nil {
			respondErr(st, err)
			return
		}
	}
	fd, err := g.root.open(req.Path, unix.O_WRONLY|unix.O_CREAT|unix.O_NOCTTY|unix.O_NONBLOCK, mode)
	if err != nil {
		respondErr(st, err)
		return
	}
	f := os.NewFile(uintptr(fd), req.Path)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		respondErr(st, errnoKind(err))
		return
	}
	if !fi.Mode().IsRegular() {
		respondErr(st, fmt.Errorf("%s is not a regular file: %w", req.Path, sandbox.ErrInvalid))
		return
	}
	if err := f.Truncate(0); err != nil {
		respondErr(st, errnoKind(err))
		return
	}
	// Exactly mode, whatever the umask. Not on someone else's existing
	// file that we may write but not chmod: then its mode stays.
	if err := f.Chmod(fs.FileMode(mode)); err != nil && !errors.Is(err, unix.EPERM) {
		respondErr(st, errnoKind(err))
		return
	}
	fr := newFrameReader(st, MaxFramePayload)
	for {
		typ, payload, err := fr.next()
		if err != nil {
			return // host gone
		}
		switch typ {
		case frameData:
			if _, err := f.Write(payload); err != nil {
				respondErr(st, fmt.Errorf("write %s: %w", req.Path, errnoKind(err)))
				return
			}
		case frameEnd:
			if err := f.Close(); err != nil {
				respondErr(st, fmt.Errorf("close %s: %w", req.Path, errnoKind(err)))
				return
			}
			respond(st, &response{})
			return
		case frameError:
			respondErr(st, fmt.Errorf("host aborted the write: %w", sandbox.ErrInvalid))
			return
		default:
			respondErr(st, fmt.Errorf("unexpected frame %q: %w", typ, sandbox.ErrInvalid))
			return
		}
	}
}

func (g *guest) stat(st *yamux.Stream, req *request) {
	info, err := g.lstat(req.Path)
	if err != nil {
		respondErr(st, err)
		return
	}
	g.idNames().name(info)
	respond(st, &response{Info: info})
}

func (g *guest) lstat(p string) (*wireFileInfo, error) {
	if p == "/" {
		var s unix.Stat_t
		if err := unix.Fstat(g.root.fd, &s); err != nil {
			return nil, errnoKind(err)
		}
		info := toWireInfo("/", &s, "")
		info.Meta = readMetaFD(g.root.fd)
		return info, nil
	}
	dfd, base, err := g.root.parent(p)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	return statAt(dfd, base)
}

func statAt(dfd int, name string) (*wireFileInfo, error) {
	var s unix.Stat_t
	if err := unix.Fstatat(dfd, name, &s, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, errnoKind(err)
	}
	link := ""
	if s.Mode&unix.S_IFMT == unix.S_IFLNK {
		buf := make([]byte, MaxPathLen)
		n, err := unix.Readlinkat(dfd, name, buf)
		if err == nil {
			link = string(buf[:n])
		}
	}
	info := toWireInfo(name, &s, link)
	if metaFileOK(s.Mode) {
		info.Meta = readMetaAt(dfd, name)
	}
	return info, nil
}

func toWireInfo(name string, s *unix.Stat_t, link string) *wireFileInfo {
	mode := fs.FileMode(s.Mode & 0o777)
	switch s.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	}
	if s.Mode&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if s.Mode&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if s.Mode&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return &wireFileInfo{
		Name:    name,
		Size:    s.Size,
		Mode:    uint32(mode),
		ModTime: time.Unix(s.Mtim.Unix()).UnixNano(),
		Link:    link,
		UID:     s.Uid,
		GID:     s.Gid,
	}
}

// listBatch bounds the JSON of one entries frame.
const listBatch = 256 << 10

func (g *guest) list(st *yamux.Stream, req *request) {
	fd, err := g.root.open(req.Path, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		respondErr(st, err)
		return
	}
	f := os.NewFile(uintptr(fd), req.Path)
	defer f.Close()
	if err := respond(st, &response{}); err != nil {
		return
	}
	watchHost(st)
	ids := g.idNames()
	batch := []byte{'['}
	flush := func() error {
		if len(batch) == 1 {
			return nil
		}
		batch[len(batch)-1] = ']'
		err := writeFrame(st, frameEntries, batch)
		batch = append(batch[:0], '[')
		return err
	}
	for {
		names, err := f.Readdirnames(256)
		for _, name := range names {
			info, serr := statAt(fd, name)
			if serr != nil {
				continue // removed meanwhile
			}
			ids.name(info)
			b, _ := json.Marshal(info)
			if len(batch)+len(b)+1 > listBatch {
				if flush() != nil {
					return
				}
			}
			batch = append(batch, b...)
			batch = append(batch, ',')
		}
		if err == io.EOF || (err == nil && len(names) == 0) {
			break
		}
		if err != nil {
			writeJSONFrame(st, frameError, toWire(errnoKind(err)))
			return
		}
	}
	if flush() != nil {
		return
	}
	writeFrame(st, frameEnd, nil)
}

func (g *guest) mkdir(st *yamux.Stream, req *request) {
	mode := req.Mode & 0o777
	var err error
	if req.Parents {
		err = g.mkdirAll(req.Path, mode)
	} else {
		err = g.mkdirOne(req.Path, mode)
	}
	if err != nil {
		respondErr(st, err)
		return
	}
	respond(st, &response{})
}

// mkdirOne creates p with exactly mode (not masked by the umask).
func (g *guest) mkdirOne(p string, mode uint32) error {
	dfd, base, err := g.root.parent(p)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	if err := unix.Mkdirat(dfd, base, mode); err != nil {
		return errnoKind(err)
	}
	fd, err := unix.Openat(dfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return errnoKind(err)
	}
	defer unix.Close(fd)
	return errnoKind(unix.Fchmod(fd, mode))
}

// mkdirAll creates p and its missing parents; existing directories are fine.
func (g *guest) mkdirAll(p string, mode uint32) error {
	if err := checkPath(p); err != nil {
		return err
	}
	if p == "/" {
		return nil
	}
	parts := strings.Split(p[1:], "/")
	for i := range parts {
		prefix := "/" + strings.Join(parts[:i+1], "/")
		err := g.mkdirOne(prefix, mode)
		if err == nil {
			continue
		}
		if !isExist(err) {
			return err
		}
		fd, err := g.root.open(prefix, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return fmt.Errorf("%s exists and is not a directory: %w", prefix, err)
		}
		unix.Close(fd)
	}
	return nil
}

func isExist(err error) bool {
	return errorsIs(err, sandbox.ErrExists)
}

func (g *guest) remove(st *yamux.Stream, req *request) {
	dfd, base, err := g.root.parent(req.Path)
	if err != nil {
		respondErr(st, err)
		return
	}
	defer unix.Close(dfd)
	if err := removeAt(dfd, base, req.Recursive, 0); err != nil {
		respondErr(st, err)
		return
	}
	respond(st, &response{})
}

// removeAt removes name in dfd without following symlinks.
func removeAt(dfd int, name string, recursive bool, depth int) error {
	var s unix.Stat_t
	if err := unix.Fstatat(dfd, name, &s, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return errnoKind(err)
	}
	if s.Mode&unix.S_IFMT != unix.S_IFDIR {
		return errnoKind(unix.Unlinkat(dfd, name, 0))
	}
	if recursive {
		if depth >= maxRemoveDepth {
			return fmt.Errorf("directory tree deeper than %d: %w", maxRemoveDepth, sandbox.ErrLimit)
		}
		fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return errnoKind(err)
		}
		f := os.NewFile(uintptr(fd), name)
		for {
			names, rerr := f.Readdirnames(256)
			for _, n := range names {
				if err := removeAt(fd, n, true, depth+1); err != nil && !errorsIs(err, sandbox.ErrNotFound) {
					f.Close()
					return err
				}
			}
			if rerr != nil || len(names) == 0 {
				break
			}
		}
		f.Close()
	}
	return errnoKind(unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR))
}

func (g *guest) rename(st *yamux.Stream, req *request) {
	if err := checkPath(req.To); err != nil {
		respondErr(st, err)
		return
	}
	ofd, obase, err := g.root.parent(req.Path)
	if err != nil {
		respondErr(st, err)
		return
	}
	defer unix.Close(ofd)
	nfd, nbase, err := g.root.parent(req.To)
	if err != nil {
		respondErr(st, err)
		return
	}
	defer unix.Close(nfd)
	if err := unix.Renameat(ofd, obase, nfd, nbase); err != nil {
		respondErr(st, errnoKind(err))
		return
	}
	respond(st, &response{})
}
