// Package writeback brings a sandbox's changes to a host directory back to
// the host, for backends whose sandboxes write into an overlay (gVisor):
// both sides list the tree (the sandbox's list comes from the airlock
// binary run inside, and is untrusted), the difference is planned here, and
// every write is decided by policy.ConfigGuard on the host's own directory
// before it is made, with set-id bits stripped. It must never follow a
// symlink on the host (everything goes through os.Root), never write
// outside the directory it syncs, and never take more than the sandbox
// showed: the content comes from the sandbox's own files, bounded.
package writeback

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/policy"
)

// Entry is one directory entry of a tree, relative to its root.
type Entry struct {
	Path  string `json:"p"`           // slash-separated, relative, clean; "" is the root
	Type  string `json:"t"`           // "f" file, "d" directory, "l" symlink, "x" there but unreadable
	Mode  uint32 `json:"m"`           // permission bits (and set-id/sticky as the kernel had them)
	Size  int64  `json:"s"`           // files only
	MTime int64  `json:"mt"`          // nanoseconds
	Link  string `json:"l,omitempty"` // symlink target
}

// MaxEntries bounds a listing (either side).
const MaxEntries = 1 << 20

// Walk lists root's tree (not following symlinks) as JSON lines on w. What
// it cannot read is listed as "x" (unknown): write-back never removes
// anything below it, so an incomplete listing cannot delete host files. It is what `airlock __walk` runs inside
// a sandbox; the host lists its side with List.
func Walk(root string, w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	err := walk(root, func(e Entry) error { return enc.Encode(e) })
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return err
}

// List lists root's tree in memory.
func List(root string) (map[string]Entry, error) {
	out := map[string]Entry{}
	err := walk(root, func(e Entry) error {
		if len(out) >= MaxEntries {
			return fmt.Errorf("list %s: more than %d entries", root, MaxEntries)
		}
		out[e.Path] = e
		return nil
	})
	return out, err
}

func walk(root string, emit func(Entry) error) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	queue := []string{"."}
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		var ents []fs.DirEntry
		f, err := r.Open(dir)
		if err == nil {
			ents, err = f.ReadDir(-1)
			f.Close()
		}
		if err != nil {
			if dir != "." && !errors.Is(err, fs.ErrNotExist) {
				if err := emit(Entry{Path: dir, Type: "x"}); err != nil {
					return err
				}
			}
			if dir == "." {
				return err
			}
			continue
		}
		sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
		for _, de := range ents {
			rel := path.Join(dir, de.Name())
			fi, err := r.Lstat(rel)
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed meanwhile
			}
			if err != nil {
				if err := emit(Entry{Path: rel, Type: "x"}); err != nil {
					return err
				}
				continue
			}
			e := Entry{Path: rel, Mode: uint32(fi.Mode().Perm()) | specialBits(fi.Mode()), MTime: fi.ModTime().UnixNano()}
			switch {
			case fi.Mode()&fs.ModeSymlink != 0:
				e.Type = "l"
				e.Link, _ = r.Readlink(rel)
			case fi.IsDir():
				e.Type = "d"
			case fi.Mode().IsRegular():
				e.Type = "f"
				e.Size = fi.Size()
			default:
				continue // fifos, sockets, devices are not synced
			}
			if err := emit(e); err != nil {
				return err
			}
			if e.Type == "d" {
				queue = append(queue, rel)
			}
		}
	}
	return nil
}

func specialBits(m fs.FileMode) uint32 {
	var b uint32
	if m&fs.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

// ReadEntries reads a listing written by Walk (from inside a sandbox:
// untrusted), checking every path is relative and clean.
func ReadEntries(r io.Reader) (map[string]Entry, error) {
	out := map[string]Entry{}
	dec := json.NewDecoder(r)
	for {
		var e Entry
		err := dec.Decode(&e)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("sandbox listing: %w", err)
		}
		if len(out) >= MaxEntries {
			return nil, fmt.Errorf("sandbox listing: more than %d entries", MaxEntries)
		}
		if e.Path == "" || path.IsAbs(e.Path) || path.Clean(e.Path) != e.Path || e.Path == ".." || strings.HasPrefix(e.Path, "../") || strings.ContainsRune(e.Path, 0) {
			return nil, fmt.Errorf("sandbox listing: bad path %q", e.Path)
		}
		switch e.Type {
		case "f", "d", "l", "x":
		default:
			return nil, fmt.Errorf("sandbox listing: %s: bad type %q", e.Path, e.Type)
		}
		if e.Size < 0 || len(e.Link) > 4096 || strings.ContainsRune(e.Link, 0) {
			return nil, fmt.Errorf("sandbox listing: %s: bad size or link", e.Path)
		}
		out[e.Path] = e
	}
}

// Change is one thing to do on the host.
type Change struct {
	Op    string // "mkdir", "write", "symlink", "chmod", "remove"
	Entry Entry  // the sandbox's entry (remove: the host's)
}

// Plan returns what makes host like inside, in an order that can be
// applied: removals deepest first, then creations parents first. Entries
// below a skipped path (private mounts of the sandbox) are left alone.
func Plan(inside, host map[string]Entry, skip func(rel string) bool) []Change {
	var unknown []string
	for p, e := range inside {
		if e.Type == "x" {
			unknown = append(unknown, p)
		}
	}
	userSkip := skip
	skip = func(rel string) bool {
		for _, u := range unknown {
			if rel == u || strings.HasPrefix(rel, u+"/") {
				return true // the sandbox could not say: leave the host's as is
			}
		}
		return userSkip != nil && userSkip(rel)
	}
	var removes, creates []Change
	for p, h := range host {
		if skip(p) {
			continue
		}
		in, ok := inside[p]
		if !ok || in.Type != h.Type {
			removes = append(removes, Change{Op: "remove", Entry: h})
		}
	}
	for p, in := range inside {
		if skip(p) {
			continue
		}
		h, ok := host[p]
		same := ok && h.Type == in.Type
		switch in.Type {
		case "d":
			if !same {
				creates = append(creates, Change{Op: "mkdir", Entry: in})
			} else if h.Mode != in.Mode {
				creates = append(creates, Change{Op: "chmod", Entry: in})
			}
		case "f":
			if !same || h.Size != in.Size || h.MTime != in.MTime {
				creates = append(creates, Change{Op: "write", Entry: in})
			} else if h.Mode != in.Mode {
				creates = append(creates, Change{Op: "chmod", Entry: in})
			}
		case "l":
			if !same || h.Link != in.Link {
				creates = append(creates, Change{Op: "symlink", Entry: in})
			}
		}
	}
	// A removed directory takes its contents: drop removals below another.
	sort.Slice(removes, func(i, j int) bool { return removes[i].Entry.Path < removes[j].Entry.Path })
	var kept []Change
	for _, r := range removes {
		if len(kept) > 0 && strings.HasPrefix(r.Entry.Path, kept[len(kept)-1].Entry.Path+"/") && kept[len(kept)-1].Entry.Type == "d" {
			continue
		}
		kept = append(kept, r)
	}
	sort.Slice(creates, func(i, j int) bool {
		di, dj := strings.Count(creates[i].Entry.Path, "/"), strings.Count(creates[j].Entry.Path, "/")
		if di != dj {
			return di < dj
		}
		return creates[i].Entry.Path < creates[j].Entry.Path
	})
	return append(kept, creates...)
}

// Target is the host directory a sandbox's changes are applied to.
type Target struct {
	Root  string              // the host directory (at the same path inside)
	Guard *policy.ConfigGuard // decides every write; nil allows all but set-id
	// Owner of created entries (the sandbox's host uid/gid); -1 keeps ours.
	UID, GID int
	// Open returns the content of a sandbox file (rel to Root).
	Open func(rel string) (io.ReadCloser, error)
	// Since is when the sandbox started (ns): a host entry changed after
	// it that the sandbox changed too is a conflict, left as the host has it.
	Since int64
	// Report receives each refusal.
	Report func(policy.Denial)
}

// Result says what Apply did.
type Result struct {
	Applied   int
	Denied    int
	Conflicts []string
	Errors    []string
}

// Apply makes the changes on the host, each decided by the guard first.
func Apply(t Target, host map[string]Entry, changes []Change) Result {
	var res Result
	r, err := os.OpenRoot(t.Root)
	if err != nil {
		res.Errors = append(res.Errors, err.Error())
		return res
	}
	defer r.Close()
	guard := t.Guard
	if guard == nil {
		guard = &policy.ConfigGuard{}
	}
	for _, c := range changes {
		e := c.Entry
		full := path.Join(t.Root, e.Path)
		if h, ok := host[e.Path]; ok && h.MTime > t.Since && c.Op != "mkdir" {
			res.Conflicts = append(res.Conflicts, full)
			continue
		}
		op, ok := guardOp(c, host)
		if ok {
			if d := guard.Check(op, HostDir(path.Dir(full)), path.Base(full)); d != nil {
				res.Denied++
				if t.Report != nil {
					t.Report(*d)
				}
				continue
			}
		}
		if err := apply(r, t, c); err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("%s %s: %v", c.Op, full, err))
			continue
		}
		res.Applied++
	}
	return res
}

// guardOp is the guard operation of a change (ok false: removals, which
// no rule refuses).
func guardOp(c Change, host map[string]Entry) (policy.GuardOp, bool) {
	switch c.Op {
	case "mkdir":
		return policy.OpMkdir, true
	case "symlink":
		return policy.OpSymlink, true
	case "write":
		if _, ok := host[c.Entry.Path]; ok {
			return policy.OpWrite, true
		}
		return policy.OpCreate, true
	case "chmod":
		return policy.OpChmodExec, c.Entry.Mode&0o111 != 0
	}
	return 0, false
}

// perm is a mode without set-id bits (which no host file gets from a
// sandbox).
func perm(m uint32) fs.FileMode {
	out := fs.FileMode(m & 0o777)
	if m&0o1000 != 0 {
		out |= fs.ModeSticky
	}
	return out
}

func apply(r *os.Root, t Target, c Change) error {
	e := c.Entry
	switch c.Op {
	case "remove":
		return r.RemoveAll(e.Path)
	case "mkdir":
		if err := r.Mkdir(e.Path, perm(e.Mode)); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if err := r.Chmod(e.Path, perm(e.Mode)); err != nil {
			return err
		}
	case "symlink":
		_ = r.Remove(e.Path)
		if err := r.Symlink(e.Link, e.Path); err != nil {
			return err
		}
		return chown(r, t, e.Path)
	case "chmod":
		return r.Chmod(e.Path, perm(e.Mode))
	case "write":
		src, err := t.Open(e.Path)
		if err != nil {
			return err
		}
		defer src.Close()
		f, err := r.OpenFile(e.Path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|oNoFollow, perm(e.Mode))
		if err != nil {
			return err
		}
		n, err := io.Copy(f, io.LimitReader(src, e.Size+1))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if n != e.Size {
			return fmt.Errorf("the sandbox's file is %d bytes, not the %d it listed", n, e.Size)
		}
		if err := r.Chmod(e.Path, perm(e.Mode)); err != nil {
			return err
		}
	}
	if err := chown(r, t, e.Path); err != nil {
		return err
	}
	mt := time.Unix(0, e.MTime)
	return r.Chtimes(e.Path, mt, mt)
}

func chown(r *os.Root, t Target, p string) error {
	if t.UID < 0 || os.Geteuid() != 0 {
		return nil
	}
	return r.Lchown(p, t.UID, t.GID)
}

// HostDir is a policy.GuardDir over a host directory (for deciding writes
// made on the host itself: write-back, the wasm backend's file layer).
func HostDir(p string) policy.GuardDir { return hostDir(path.Clean(p)) }

type hostDir string

func (h hostDir) Path() string { return string(h) }

func (h hostDir) Has(rel string) bool {
	_, err := os.Lstat(path.Join(string(h), rel))
	return err == nil
}

func (h hostDir) Parent() policy.GuardDir {
	if h == "/" {
		return nil
	}
	return hostDir(path.Dir(string(h)))
}
