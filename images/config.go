package images

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/internal/userspec"
	"github.com/airlock-dev/airlock/policy"
)

// DefaultPath is the PATH of an image that sets none (Docker's).
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Apply fills in an unresolved policy from the image's config, where the
// policy says nothing itself: environment variables (the image's, then
// PATH and HOME), the working directory, and the user (the image's
// USER, root when it has none, resolved with the image's /etc/passwd and
// /etc/group). It names the image in filesystem.image. What the policy
// sets always wins.
func (r *Rootfs) Apply(p *policy.Policy) error {
	im := r.Image
	if p.Filesystem.Rootfs != "" {
		return fmt.Errorf("image %s: the policy has a rootfs too (they are exclusive): %w", r.name(), errdefs.ErrInvalid)
	}
	if p.Filesystem.Image == "" {
		p.Filesystem.Image = r.name()
	}
	if p.Process.Env == nil {
		p.Process.Env = map[string]string{}
	}
	for _, kv := range im.Config.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if _, set := p.Process.Env[k]; !set {
			p.Process.Env[k] = v
		}
	}
	if _, ok := p.Process.Env["PATH"]; !ok {
		p.Process.Env["PATH"] = DefaultPath
	}
	if p.Process.Workdir == "" && im.Config.WorkingDir != "" {
		if !path.IsAbs(im.Config.WorkingDir) {
			return fmt.Errorf("image %s: working directory %q is not absolute: %w", r.name(), im.Config.WorkingDir, errdefs.ErrInvalid)
		}
		p.Process.Workdir = path.Clean(im.Config.WorkingDir)
	}
	u, err := r.User(im.Config.User)
	if err != nil {
		return err
	}
	if p.Process.UID == nil {
		uid := u.UID
		p.Process.UID = &uid
		if p.Process.GID == nil {
			gid := u.GID
			p.Process.GID = &gid
		}
	}
	if _, ok := p.Process.Env["HOME"]; !ok {
		home := u.Home
		if home == "" || *p.Process.UID != u.UID {
			home = "/"
			if *p.Process.UID == 0 {
				home = "/root"
			}
		}
		p.Process.Env["HOME"] = home
	}
	return nil
}

// User resolves spec ("" is root) against the image's /etc/passwd and
// /etc/group. Answers are kept for the lease: the layers never change, and
// a warm pool's hand-out resolves its sandbox's policy again.
func (r *Rootfs) User(spec string) (userspec.User, error) {
	r.usersMu.Lock()
	u, ok := r.users[spec]
	r.usersMu.Unlock()
	if ok {
		return u, nil
	}
	pw, _ := r.ReadFile("/etc/passwd")
	gr, _ := r.ReadFile("/etc/group")
	u, err := userspec.Resolve(spec, bytes.NewReader(pw), bytes.NewReader(gr))
	if err != nil {
		return u, fmt.Errorf("image %s: %w", r.name(), err)
	}
	r.usersMu.Lock()
	if r.users == nil {
		r.users = map[string]userspec.User{}
	}
	if len(r.users) < 64 {
		r.users[spec] = u
	}
	r.usersMu.Unlock()
	return u, nil
}

func (r *Rootfs) name() string {
	if len(r.Image.Names) > 0 {
		return ShortName(r.Image.Names[0])
	}
	return r.Image.ShortID()
}

// ReadFile reads a file of the image as its overlay root shows it (the
// topmost layer that has it, unless a layer above whites it out or makes
// a directory on its way opaque), at most 1 MiB. It follows no symlink.
func (r *Rootfs) ReadFile(p string) ([]byte, error) {
	host, fi, err := r.lookup(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file: %w", p, errdefs.ErrNotFound)
	}
	f, err := os.Open(host)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, 1<<20)
	n, err := f.Read(b)
	if err != nil && n == 0 && fi.Size() > 0 {
		return nil, err
	}
	return b[:n], nil
}

// Lstat describes path p of the image as its overlay root shows it (a
// symlink is not followed, neither are symlinks on the way).
func (r *Rootfs) Lstat(p string) (os.FileInfo, error) {
	_, fi, err := r.lookup(p)
	return fi, err
}

// lookup finds p in the topmost layer that shows it; ErrNotFound when a
// layer above whites it out, makes a directory on its way opaque, or has
// a non-directory on its way.
func (r *Rootfs) lookup(p string) (string, os.FileInfo, error) {
	rel := strings.TrimPrefix(path.Clean("/"+p), "/")
	if rel == "" {
		fi, err := os.Lstat(r.Layers[len(r.Layers)-1])
		return r.Layers[len(r.Layers)-1], fi, err
	}
	comps := strings.Split(rel, "/")
	for i := len(r.Layers) - 1; i >= 0; i-- {
		layer := r.Layers[i]
		stop := false
		for j := range comps {
			sub := filepath.Join(layer, filepath.Join(comps[:j+1]...))
			fi, err := os.Lstat(sub)
			if err != nil {
				break
			}
			if isWhiteout(fi) {
				return "", nil, fmt.Errorf("%s: %w", p, errdefs.ErrNotFound)
			}
			if j < len(comps)-1 {
				if !fi.IsDir() {
					return "", nil, fmt.Errorf("%s: %w", p, errdefs.ErrNotFound)
				}
				if opaque(sub) {
					stop = true
				}
				continue
			}
			return sub, fi, nil
		}
		if stop {
			break
		}
	}
	return "", nil, fmt.Errorf("%s: %w", p, errdefs.ErrNotFound)
}
