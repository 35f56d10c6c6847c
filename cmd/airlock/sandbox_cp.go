package main

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/errdefs"
)

// splitRemote splits "ID:/path"; ok is false for a local path.
func splitRemote(s string) (id, p string, ok bool) {
	i := strings.Index(s, ":")
	if i <= 0 || strings.Contains(s[:i], "/") {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

// sbCopy copies a file or directory between the host and a sandbox. "-"
// as SRC reads a tar (plain or gzip) from stdin and extracts it into the
// sandbox directory DST; "-" as DST writes the sandbox path as a tar to
// stdout (docker cp's convention).
func sbCopy(ctx context.Context, c *client.Client, args []string) int {
	if len(args) != 2 {
		return fail("sandbox cp", fmt.Errorf("want SRC DST (one of them ID:/path, the other a local path or - for a tar on stdin/stdout): %w", errdefs.ErrInvalid))
	}
	sid, spath, sremote := splitRemote(args[0])
	did, dpath, dremote := splitRemote(args[1])
	var err error
	switch {
	case sremote && dremote, !sremote && !dremote:
		err = fmt.Errorf("exactly one of SRC and DST must be ID:/path: %w", errdefs.ErrInvalid)
	case args[0] == "-":
		err = c.Upload(ctx, did, dpath, os.Stdin)
	case args[1] == "-":
		err = cpTarToStdout(ctx, c, sid, spath)
	case sremote:
		err = cpFromSandbox(ctx, c, sid, spath, args[1])
	default:
		err = cpToSandbox(ctx, c, args[0], did, dpath)
	}
	if err != nil {
		return fail("sandbox cp", err)
	}
	return 0
}

func cpTarToStdout(ctx context.Context, c *client.Client, id, remote string) error {
	rc, err := c.Download(ctx, id, remote)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = io.Copy(os.Stdout, rc)
	return err
}

func cpToSandbox(ctx context.Context, c *client.Client, local, id, remote string) error {
	st, err := os.Stat(local)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		f, err := os.Open(local)
		if err != nil {
			return err
		}
		defer f.Close()
		if strings.HasSuffix(remote, "/") {
			remote = path.Join(remote, filepath.Base(local))
		}
		return c.WriteFile(ctx, id, remote, f, st.Mode().Perm())
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarDir(pw, local)) }()
	return c.Upload(ctx, id, remote, pr)
}

// tarDir writes the regular files and directories under dir (symlinks and
// special files are skipped: the server refuses them).
func tarDir(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: filepath.ToSlash(rel) + "/", Mode: int64(info.Mode().Perm()), ModTime: info.ModTime()})
		case info.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: filepath.ToSlash(rel), Mode: int64(info.Mode().Perm()), Size: info.Size(), ModTime: info.ModTime()}); err != nil {
				return err
			}
			_, err = io.CopyN(tw, f, info.Size())
			return err
		default:
			fmt.Fprintf(os.Stderr, "airlock sandbox cp: skipping %s (not a file or directory)\n", p)
			return nil
		}
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func cpFromSandbox(ctx context.Context, c *client.Client, id, remote, local string) error {
	fi, err := c.Stat(ctx, id, remote)
	if err != nil {
		return err
	}
	if !fi.IsDir {
		rc, err := c.ReadFile(ctx, id, remote)
		if err != nil {
			return err
		}
		defer rc.Close()
		if st, err := os.Stat(local); err == nil && st.IsDir() {
			local = filepath.Join(local, path.Base(remote))
		}
		f, err := os.OpenFile(local, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, rc); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	rc, err := c.Download(ctx, id, remote)
	if err != nil {
		return err
	}
	defer rc.Close()
	return untarInto(rc, local)
}

// untarInto extracts a downloaded tree into dir through an os.Root, so no
// entry and no symlink already in dir can make it write outside dir;
// relative names only, no "..", links and special files skipped (a
// sandbox must not be able to write outside dir).
func untarInto(r io.Reader, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(h.Name)
		// The archive's top entry is the directory itself.
		if i := strings.Index(name, "/"); i >= 0 {
			name = name[i+1:]
		} else {
			name = "."
		}
		if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("archive entry %q escapes the target: %w", h.Name, errdefs.ErrPermission)
		}
		local := filepath.FromSlash(name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(local, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			f, err := root.OpenFile(local, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fs.FileMode(h.Mode).Perm()|0o600)
			if err != nil {
				return err
			}
			if _, err := io.CopyN(f, tr, h.Size); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		default:
			fmt.Fprintf(os.Stderr, "airlock sandbox cp: skipping %s (link or special file)\n", h.Name)
		}
	}
}
