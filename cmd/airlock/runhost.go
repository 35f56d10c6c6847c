package main

// What `airlock run` adds to a sandbox from the caller's host: pinned
// files, tool caches in airlock's own store, the git identity, and the
// toolchains on PATH that live under the (hidden) home directory.

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// pinned are the files of this run the sandbox must never rewrite, even
// when a writable path holds them: the policy file (the sandbox would
// widen its own next run), the audit log and the result file.
func (f *runFlags) pinned(pol *policy.Policy) map[string]string {
	out := map[string]string{}
	add := func(p, what string) {
		if p == "" || p == "-" {
			return
		}
		if abs, err := filepath.Abs(p); err == nil {
			out[abs] = what
			if real, err := filepath.EvalSymlinks(abs); err == nil {
				out[real] = what
			}
		}
	}
	add(f.policyFile, "the policy file")
	add(pol.Audit.File, "the audit log")
	add(f.resultFile, "the result file")
	return out
}

// cacheStore is airlock's own per-user cache directory.
func cacheStore() (string, error) {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" || !filepath.IsAbs(base) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("cache store: no home directory: %w", err)
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "airlock", "caches"), nil
}

// cacheBinds makes (once) and returns the store directories of the
// policy's caches, bound where each tool looks inside the sandbox's home.
// They are never the host's own cache directories: an agent must not be
// able to poison what the host's tools trust.
func cacheBinds(pol *policy.Policy) ([]sandbox.Bind, error) {
	if len(pol.Caches) == 0 {
		return nil, nil
	}
	home := pol.Process.Env["HOME"]
	if home == "" || !filepath.IsAbs(home) {
		return nil, fmt.Errorf("caches: the sandbox has no home directory to put them in: %w", sandbox.ErrInvalid)
	}
	store, err := cacheStore()
	if err != nil {
		return nil, err
	}
	var out []sandbox.Bind
	for _, name := range pol.Caches {
		c, ok := policy.LookupCache(name)
		if !ok {
			return nil, fmt.Errorf("cache %q: unknown (known: %s): %w", name, strings.Join(policy.CacheNames(), ", "), sandbox.ErrInvalid)
		}
		for _, rel := range c.Home {
			src := filepath.Join(store, name, strings.ReplaceAll(rel, "/", "_"))
			if err := os.MkdirAll(src, 0o700); err != nil {
				return nil, fmt.Errorf("cache %q: %w", name, err)
			}
			out = append(out, sandbox.Bind{Src: src, Dst: filepath.Join(home, rel)})
		}
	}
	return out, nil
}

// homeFiles are read-only files made for the sandbox's home: a
// ~/.gitconfig with the caller's git identity only (user.name and
// user.email), so that commits inside are the caller's while the rest of
// the host's git config (credential helpers, URL rewrites with tokens)
// stays out.
func homeFiles(pol *policy.Policy) ([]sandbox.File, error) {
	home := pol.Process.Env["HOME"]
	if home == "" || !filepath.IsAbs(home) || pol.Filesystem.Rootfs != "" || pol.Filesystem.Image != "" {
		return nil, nil
	}
	hostHome, _ := os.UserHomeDir()
	if hostHome == "" {
		return nil, nil
	}
	name, email := gitIdentity(hostHome)
	if name == "" && email == "" {
		return nil, nil
	}
	var b strings.Builder
	b.WriteString("# written by airlock: your git identity only (read-only)\n[user]\n")
	if name != "" {
		fmt.Fprintf(&b, "\tname = %s\n", gitQuote(name))
	}
	if email != "" {
		fmt.Fprintf(&b, "\temail = %s\n", gitQuote(email))
	}
	return []sandbox.File{{Path: filepath.Join(home, ".gitconfig"), Data: []byte(b.String()), Mode: 0o444}}, nil
}

// gitIdentity reads user.name and user.email from the caller's global git
// config (~/.gitconfig, then $XDG_CONFIG_HOME/git/config).
func gitIdentity(home string) (name, email string) {
	xdg := os.Getenv("XDG_CONFIG_HOME")
	if xdg == "" {
		xdg = filepath.Join(home, ".config")
	}
	for _, p := range []string{filepath.Join(xdg, "git", "config"), filepath.Join(home, ".gitconfig")} {
		n, e := readGitUser(p)
		if n != "" {
			name = n
		}
		if e != "" {
			email = e
		}
	}
	return name, email
}

// readGitUser is a minimal reader of git's config format: the [user]
// section's name and email (later values win, as in git).
func readGitUser(p string) (name, email string) {
	f, err := os.Open(p)
	if err != nil {
		return "", ""
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	inUser := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			sec := strings.ToLower(strings.Trim(line, "[] \t"))
			inUser = sec == "user"
			continue
		}
		if !inUser || line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		v = strings.Trim(strings.TrimSpace(v), `"`)
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "name":
			name = v
		case "email":
			email = v
		}
	}
	return name, email
}

// gitQuote quotes a config value (no newlines or control characters get in).
func gitQuote(v string) string {
	v = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, v)
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
}

// toolchainRoots maps a PATH entry under $HOME to what must be visible for
// it to work (shims need their manager's root; bin dirs their libraries).
// The host's credentials next to them (~/.cargo/credentials.toml) are not
// among them.
func toolchainRoots(home, dir string) []string {
	rel, err := filepath.Rel(home, dir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return nil
	}
	first := strings.SplitN(rel, "/", 2)[0]
	switch {
	case rel == ".pyenv/shims" || rel == ".pyenv/bin" || rel == ".rbenv/shims" || rel == ".rbenv/bin":
		return []string{filepath.Join(home, first)}
	case strings.HasPrefix(rel, ".nvm/versions/node/"):
		parts := strings.Split(rel, "/")
		if len(parts) >= 4 {
			return []string{filepath.Join(home, ".nvm/versions/node", parts[3])}
		}
	case rel == ".cargo/bin":
		return []string{dir, filepath.Join(home, ".rustup")}
	case rel == ".local/bin":
		return []string{dir, filepath.Join(home, ".local/lib")}
	}
	return []string{dir}
}

// adjustToolchains handles PATH entries under the caller's home, which the
// sandbox hides: the coding-agent profile makes them visible read-only
// (with what they need), every other profile drops them from PATH with a
// notice (adviseOnce), so that PATH never silently points at nothing.
// It returns the entries dropped.
func adjustToolchains(pol *policy.Policy) (dropped []string) {
	home := pol.Process.Env["HOME"]
	path := pol.Process.Env["PATH"]
	if home == "" || path == "" || !slices.Contains(pol.Filesystem.Tmpfs, home) {
		return nil // the home is not hidden
	}
	var keep []string
	for _, dir := range filepath.SplitList(path) {
		if dir != home && !strings.HasPrefix(dir, home+"/") {
			keep = append(keep, dir)
			continue
		}
		if _, err := os.Stat(dir); err != nil {
			continue // nothing there on the host either
		}
		if pol.Profile == "coding-agent" {
			for _, r := range toolchainRoots(home, dir) {
				if _, err := os.Stat(r); err == nil && !slices.Contains(pol.Filesystem.ReadOnly, r) {
					pol.Filesystem.ReadOnly = append(pol.Filesystem.ReadOnly, r)
				}
			}
			keep = append(keep, dir)
			continue
		}
		if !slices.Contains(dropped, dir) {
			dropped = append(dropped, dir)
		}
	}
	pol.Process.Env["PATH"] = strings.Join(keep, string(filepath.ListSeparator))
	return dropped
}

// homeAdvice is the advice about PATH entries dropped with the hidden home.
func homeAdvice(dropped []string) string {
	return "airlock: your home is hidden in the sandbox; dropped from PATH: " + strings.Join(dropped, ", ") +
		" (--profile coding-agent keeps them read-only, or --ro DIR)\n"
}

// adviseOnce prints advice that is not about a failure once per workspace
// (a marker in airlock's own cache directory remembers it), or every time
// with --verbose: a harness hands a command's stderr to the model, so
// the same notice on every run is noise it pays for.
func adviseOnce(w io.Writer, workspace, advice string, verbose bool) {
	if advice == "" {
		return
	}
	store, err := cacheStore()
	if err != nil || verbose {
		fmt.Fprint(w, advice)
		return
	}
	sum := sha256.Sum256([]byte(workspace + "\x00" + advice))
	dir := filepath.Join(filepath.Dir(store), "advice")
	marker := filepath.Join(dir, hex.EncodeToString(sum[:16]))
	if _, err := os.Stat(marker); err == nil {
		return
	}
	fmt.Fprint(w, advice)
	if os.MkdirAll(dir, 0o700) == nil {
		_ = os.WriteFile(marker, nil, 0o600)
	}
}

// notFoundHint says, when a command was not found inside, that it is on
// the host in a PATH entry dropped with the hidden home.
func notFoundHint(name string, dropped []string) string {
	if name == "" || strings.ContainsRune(name, '/') {
		return ""
	}
	for _, dir := range dropped {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && !fi.IsDir() {
			return fmt.Sprintf("airlock run: %s is in %s on the host, under your home, which is hidden in the sandbox and dropped from PATH (--profile coding-agent keeps it read-only, or --ro %s)\n", name, dir, dir)
		}
	}
	return ""
}

// pipeWriter passes writes on and calls closed once when the reader went
// away (EPIPE).
type pipeWriter struct {
	w      io.Writer
	closed func()
	once   sync.Once
}

func (p *pipeWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		p.once.Do(p.closed)
	}
	return n, err
}

// outsideViewHints says, for each absolute path among a failed command's
// arguments that exists on the host but not inside the sandbox, how to
// expose it: "No such file or directory" alone does not tell an agent the
// file is there, only outside its view (a private /tmp, a hidden home).
func outsideViewHints(ctx context.Context, sb sandbox.Sandbox, argv []string) string {
	var b strings.Builder
	for i, arg := range argv {
		if i >= 32 {
			break
		}
		if !filepath.IsAbs(arg) {
			continue
		}
		p := filepath.Clean(arg)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if _, err := sb.Files().Stat(ctx, p); !errors.Is(err, sandbox.ErrNotFound) {
			continue
		}
		fmt.Fprintf(&b, "airlock run: %s exists on the host but not inside the sandbox (expose it with --ro %s, or --rw %s to let the command write it)\n", p, p, p)
	}
	return b.String()
}
