package server

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"

	"github.com/airlock-dev/airlock/sandbox"
)

// Archive limits: entries per upload or download, and directory depth.
const (
	maxArchiveEntries = 100000
	maxArchiveDepth   = 64
)

// handleArchiveGet streams the tree at ?path= as a tar. Symlinks are
// stored as links (never followed); special files are skipped.
func (s *Server) handleArchiveGet(w http.ResponseWriter, r *http.Request) {
	l, root, release := s.acquireFile(w, r)
	if l == nil {
		return
	}
	defer release()
	files := l.sb.Files()
	fi, err := files.Stat(r.Context(), root)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("archive %q in %q: %w", root, l.sb.ID(), err))
		return
	}
	// The tree is listed first: over the entry or depth limit the answer
	// is an error, never a 200 with a silently cut tar.
	var tree []treeEntry
	if err := listTree(r.Context(), files, root, path.Base(root), fi, 0, &tree); err != nil {
		s.writeError(w, r, fmt.Errorf("archive %q in %q: %w", root, l.sb.ID(), err))
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.WriteHeader(http.StatusOK)
	tw := tar.NewWriter(w)
	for _, e := range tree {
		if err := tarEntryOut(r.Context(), files, tw, e); err != nil {
			// A file that changed meanwhile, or the client went away: the
			// client sees a truncated tar (no end blocks).
			s.log.Warn("archive download ended early", "sandbox", l.sb.ID(), "path", root, "err", err)
			return
		}
	}
	tw.Close()
}

// treeEntry is one entry of a download: its path inside, its name in the
// tar and what List said of it.
type treeEntry struct {
	p, name string
	fi      sandbox.FileInfo
}

// listTree appends the tree at p to out (directories before their
// entries), failing with ErrLimit beyond the entry or depth limit.
func listTree(ctx context.Context, files sandbox.Files, p, name string, fi sandbox.FileInfo, depth int, out *[]treeEntry) error {
	if len(*out) >= maxArchiveEntries {
		return fmt.Errorf("more than %d entries: %w", maxArchiveEntries, sandbox.ErrLimit)
	}
	if depth > maxArchiveDepth {
		return fmt.Errorf("deeper than %d: %w", maxArchiveDepth, sandbox.ErrLimit)
	}
	if name == "/" || name == "" {
		name = "."
	}
	*out = append(*out, treeEntry{p, name, fi})
	if !fi.IsDir || fi.Mode&fs.ModeSymlink != 0 {
		return nil
	}
	kids, err := files.List(ctx, p)
	if err != nil {
		return err
	}
	for _, k := range kids {
		if err := listTree(ctx, files, path.Join(p, k.Name), path.Join(name, k.Name), k, depth+1, out); err != nil {
			return err
		}
	}
	return nil
}

// tarEntryOut writes one listed entry.
func tarEntryOut(ctx context.Context, files sandbox.Files, tw *tar.Writer, e treeEntry) error {
	p, name, fi := e.p, e.name, e.fi
	hdr := &tar.Header{Name: name, Mode: int64(fi.Mode.Perm()), ModTime: fi.ModTime}
	switch {
	case fi.Mode&fs.ModeSymlink != 0:
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, fi.Link
		return tw.WriteHeader(hdr)
	case fi.IsDir:
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
		return tw.WriteHeader(hdr)
	case fi.Mode.IsRegular():
		rc, err := files.ReadFile(ctx, p)
		if err != nil {
			return err
		}
		defer rc.Close()
		hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		// The file may have changed since Stat: copy exactly Size bytes.
		got, err := io.Copy(tw, io.LimitReader(rc, fi.Size))
		if err != nil {
			return err
		}
		if got < fi.Size {
			return fmt.Errorf("%s: shrank while archiving", p)
		}
		return nil
	default:
		return nil // devices, fifos, sockets
	}
}
