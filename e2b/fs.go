package e2b

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"sort"
	"strconv"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/e2b/envdpb"
)

// fsSvc is envd's filesystem.Filesystem over /v1's file calls.
type fsSvc struct {
	e        *envd
	watchers watchers
}

// entry is envd's EntryInfo for fi at p (symlinks resolved: their type and
// mode are the target's, symlink_target its absolute path).
func (f *fsSvc) entry(ctx context.Context, sc *scope, p string, fi *api.FileInfo) *envdpb.EntryInfo {
	e := &envdpb.EntryInfo{Name: path.Base(p), Path: p, Size: fi.Size, Mode: uint32(fi.Mode.Perm()),
		Permissions: fi.Mode.String(), ModifiedTime: timestamppb.New(fi.ModTime)}
	e.Owner, e.Group = idName(fi.Owner, fi.UID), idName(fi.Group, fi.GID)
	e.Metadata = fi.Metadata
	switch {
	case fi.Mode&fs.ModeSymlink != 0:
		target := fi.Link
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(p), target)
		}
		target = path.Clean(target)
		e.SymlinkTarget = &target
		if tfi, err := sc.c.Stat(ctx, sc.id, target); err == nil {
			e.Type, e.Mode = typeOf(tfi), uint32(tfi.Mode.Perm())
		}
	default:
		e.Type = typeOf(fi)
	}
	return e
}

// idName is a file owner's (or group's) name for envd: the sandbox's name
// for the id, else the id as a number (as ls does), else "" (unknown).
func idName(name string, id *int) string {
	if name != "" || id == nil {
		return name
	}
	return strconv.Itoa(*id)
}

func typeOf(fi *api.FileInfo) envdpb.FileType {
	switch {
	case fi.IsDir || fi.Mode.IsDir():
		return envdpb.FileType_FILE_TYPE_DIRECTORY
	case fi.Mode&fs.ModeSymlink != 0:
		return envdpb.FileType_FILE_TYPE_SYMLINK
	case fi.Mode.IsRegular():
		return envdpb.FileType_FILE_TYPE_FILE
	}
	return envdpb.FileType_FILE_TYPE_UNSPECIFIED
}

// stat is the entry at p, or envd's not_found.
func (f *fsSvc) stat(ctx context.Context, sc *scope, p string) (*envdpb.EntryInfo, error) {
	fi, err := sc.c.Stat(ctx, sc.id, p)
	if err != nil {
		if statusOf(err) == http.StatusNotFound {
			if _, ok := sc.running(context.WithoutCancel(ctx)); ok {
				return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("path '%s' does not exist", p))
			}
		}
		return nil, rpcErr(ctx, sc, err)
	}
	return f.entry(ctx, sc, p, fi), nil
}

func (f *fsSvc) Stat(ctx context.Context, req *connect.Request[envdpb.StatRequest]) (*connect.Response[envdpb.StatResponse], error) {
	sc := scopeOf(ctx)
	e, err := f.stat(ctx, sc, sc.resolve(req.Msg.Path))
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&envdpb.StatResponse{Entry: e}), nil
}

func (f *fsSvc) MakeDir(ctx context.Context, req *connect.Request[envdpb.MakeDirRequest]) (*connect.Response[envdpb.MakeDirResponse], error) {
	sc := scopeOf(ctx)
	p := sc.resolve(req.Msg.Path)
	if e, err := f.stat(ctx, sc, p); err == nil {
		if e.Type == envdpb.FileType_FILE_TYPE_DIRECTORY {
			return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("directory '%s' already exists", p))
		}
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path '%s' already exists and is not a directory", p))
	}
	if err := sc.c.Mkdir(ctx, sc.id, p, 0o755, true); err != nil {
		return nil, rpcErr(ctx, sc, err)
	}
	f.e.chown(ctx, sc, p)
	e, err := f.stat(ctx, sc, p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&envdpb.MakeDirResponse{Entry: e}), nil
}

func (f *fsSvc) Move(ctx context.Context, req *connect.Request[envdpb.MoveRequest]) (*connect.Response[envdpb.MoveResponse], error) {
	sc := scopeOf(ctx)
	src, dst := sc.resolve(req.Msg.Source), sc.resolve(req.Msg.Destination)
	if _, err := f.stat(ctx, sc, src); err != nil {
		return nil, err
	}
	if dir := path.Dir(dst); dir != "/" {
		if _, err := sc.c.Stat(ctx, sc.id, dir); err != nil {
			if err := sc.c.Mkdir(ctx, sc.id, dir, 0o755, true); err != nil {
				return nil, rpcErr(ctx, sc, err)
			}
			f.e.chown(ctx, sc, dir)
		}
	}
	if err := sc.c.Rename(ctx, sc.id, src, dst); err != nil {
		return nil, rpcErr(ctx, sc, err)
	}
	e, err := f.stat(ctx, sc, dst)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&envdpb.MoveResponse{Entry: e}), nil
}

func (f *fsSvc) Remove(ctx context.Context, req *connect.Request[envdpb.RemoveRequest]) (*connect.Response[envdpb.RemoveResponse], error) {
	sc := scopeOf(ctx)
	if err := sc.c.Remove(ctx, sc.id, sc.resolve(req.Msg.Path), true); err != nil && statusOf(err) != http.StatusNotFound {
		return nil, rpcErr(ctx, sc, err)
	}
	return connect.NewResponse(&envdpb.RemoveResponse{}), nil
}

// ListDir lists to depth (0: 1) in the order of a lexical pre-order walk
// (Go's filepath.WalkDir), the order E2B's clients compare positionally.
func (f *fsSvc) ListDir(ctx context.Context, req *connect.Request[envdpb.ListDirRequest]) (*connect.Response[envdpb.ListDirResponse], error) {
	sc := scopeOf(ctx)
	root := sc.resolve(req.Msg.Path)
	depth := int(max(req.Msg.Depth, 1))
	e, err := f.stat(ctx, sc, root)
	if err != nil {
		return nil, err
	}
	dir := root
	if e.Type != envdpb.FileType_FILE_TYPE_DIRECTORY {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path '%s' is not a directory", root))
	}
	if e.SymlinkTarget != nil {
		dir = *e.SymlinkTarget
	}
	out := &envdpb.ListDirResponse{}
	var walk func(real, shown string, level int) error
	walk = func(real, shown string, level int) error {
		l, err := sc.c.ListDir(ctx, sc.id, real)
		if err != nil {
			if level > 1 && statusOf(err) == http.StatusNotFound {
				return nil // vanished meanwhile
			}
			return rpcErr(ctx, sc, err)
		}
		sort.Slice(l, func(i, j int) bool { return l[i].Name < l[j].Name })
		for i := range l {
			fi := &l[i]
			p := path.Join(shown, fi.Name)
			ent := f.entry(ctx, sc, p, fi)
			if ent.Type == envdpb.FileType_FILE_TYPE_UNSPECIFIED {
				continue
			}
			out.Entries = append(out.Entries, ent)
			if level < depth && (fi.IsDir || fi.Mode.IsDir()) {
				if err := walk(path.Join(real, fi.Name), p, level+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(dir, root, 1); err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}
