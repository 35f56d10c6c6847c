package main

// File attacks that need only what WASI offers too (open, write, link,
// symlink, rename, remove), so they also compile for GOOS=wasip1.

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func init() {
	register("read", attackRead)
	register("list", attackList)
	register("write", attackWrite)
	register("symlink-read", attackSymlinkRead)
	register("symlink-write", attackSymlinkWrite)
	register("hardlink-read", attackHardlinkRead)
	register("hardlink-write", attackHardlinkWrite)
	register("rename-parent", attackRenameParent)
	register("rmdir-parent", attackRmdirParent)
	register("env-leak", attackEnvLeak)
}

// readSecret reads path and decides: escaped when the content holds token
// (or, without a token, when anything could be read at all).
func readSecret(path, token string) {
	b, err := os.ReadFile(path)
	if err != nil {
		blocked("read %s: %v", path, err)
	}
	if token == "" {
		if len(b) == 0 {
			blocked("read %s: empty", path)
		}
		escaped("read %d bytes of %s: %s", len(b), path, short(b))
	}
	if !bytes.Contains(b, []byte(token)) {
		blocked("read %s but it is not the host's file (%d bytes, no bait token)", path, len(b))
	}
	escaped("read host secret %s: %s", path, short(b))
}

func attackRead(p params) { readSecret(p.get("path"), p["token"]) }

func attackList(p params) {
	dir, want := p.get("path"), p.get("want")
	ents, err := os.ReadDir(dir)
	if err != nil {
		blocked("list %s: %v", dir, err)
	}
	for _, e := range ents {
		if e.Name() == want {
			escaped("listed host directory %s: contains %s (%d entries)", dir, want, len(ents))
		}
	}
	blocked("listed %s but %s is not there (%d entries): not the host's directory", dir, want, len(ents))
}

// writeFile appends data to path, creating it (and with mkdirs its parents).
func writeFile(path, data string, mkdirs bool) error {
	if mkdirs {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o755)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func attackWrite(p params) {
	path := p.get("path")
	if err := writeFile(path, p.get("data"), p["mkdirs"] == "1"); err != nil {
		blocked("write %s: %v", path, err)
	}
	escaped("wrote %s", path)
}

func attackSymlinkRead(p params) {
	target, link := p.get("target"), p.get("link")
	if err := os.Symlink(target, link); err != nil && !errors.Is(err, fs.ErrExist) {
		blocked("symlink %s -> %s: %v", link, target, err)
	}
	readSecret(link, p.get("token"))
}

func attackSymlinkWrite(p params) {
	target, link, file := p.get("target"), p.get("link"), p["file"]
	if err := os.Symlink(target, link); err != nil && !errors.Is(err, fs.ErrExist) {
		blocked("symlink %s -> %s: %v", link, target, err)
	}
	path := link
	if file != "" {
		path = filepath.Join(link, file)
	}
	if err := writeFile(path, p.get("data"), false); err != nil {
		blocked("write through symlink %s (-> %s): %v", path, target, err)
	}
	escaped("wrote through symlink %s -> %s", path, target)
}

func attackHardlinkRead(p params) {
	src, link := p.get("src"), p.get("link")
	if err := os.Link(src, link); err != nil {
		blocked("hardlink %s -> %s: %v", link, src, err)
	}
	readSecret(link, p.get("token"))
}

func attackHardlinkWrite(p params) {
	src, link := p.get("src"), p.get("link")
	if err := os.Link(src, link); err != nil {
		blocked("hardlink %s -> %s: %v", link, src, err)
	}
	if err := writeFile(link, p.get("data"), false); err != nil {
		blocked("write through hardlink %s: %v", link, err)
	}
	escaped("wrote protected %s through hardlink %s", src, link)
}

// attackRenameParent moves a protected file's parent away, writes the file
// at its new place and moves the parent back.
func attackRenameParent(p params) {
	dir, moved, rel := p.get("dir"), p.get("moved"), p.get("rel")
	if err := os.Rename(dir, moved); err != nil {
		blocked("rename %s -> %s: %v", dir, moved, err)
	}
	werr := writeFile(filepath.Join(moved, rel), p.get("data"), true)
	if err := os.Rename(moved, dir); err != nil {
		escaped("renamed protected parent %s away (write: %v; rename back: %v)", dir, werr, err)
	}
	if werr != nil {
		escaped("renamed protected parent %s away and back (write refused: %v)", dir, werr)
	}
	escaped("renamed %s, wrote %s inside, renamed it back", dir, rel)
}

// attackRmdirParent deletes a protected file's parent and recreates it with
// the attacker's file.
func attackRmdirParent(p params) {
	dir, file := p.get("dir"), p.get("file")
	if err := os.RemoveAll(dir); err != nil {
		if _, serr := os.Stat(dir); serr != nil {
			escaped("removed parts of protected %s: %v", dir, err)
		}
		blocked("remove %s: %v", dir, err)
	}
	if err := writeFile(filepath.Join(dir, file), p.get("data"), true); err != nil {
		escaped("removed protected directory %s (recreate refused: %v)", dir, err)
	}
	escaped("removed and recreated %s with %s", dir, file)
}

// attackEnvLeak looks for a host secret in its own environment and in the
// environment of PID 1 (the agent).
func attackEnvLeak(p params) {
	token := p.get("token")
	for _, kv := range os.Environ() {
		if strings.Contains(kv, token) {
			escaped("host secret in own environment: %s", strings.SplitN(kv, "=", 2)[0])
		}
	}
	if b, err := os.ReadFile("/proc/1/environ"); err == nil && bytes.Contains(b, []byte(token)) {
		escaped("host secret in /proc/1/environ")
	}
	blocked("no host secret in the environment (%d variables)", len(os.Environ()))
}

func init() { register("swap", attackSwap) }

// attackSwap flips dir between a real directory and a symlink to target for
// ms milliseconds, racing a writer on the other side (the host's Files API)
// into following the link out of the sandbox. The runner's host check
// decides whether anything landed in target.
func attackSwap(p params) {
	dir, target := p.get("dir"), p.get("target")
	ms := intParam(p, "ms")
	real := dir + ".real"
	if err := os.MkdirAll(real, 0o755); err != nil {
		blocked("mkdir %s: %v", real, err)
	}
	flips := 0
	for start := time.Now(); time.Since(start) < time.Duration(ms)*time.Millisecond; flips++ {
		os.Remove(dir)
		if err := os.Symlink(target, dir); err != nil {
			blocked("symlink %s -> %s: %v", dir, target, err)
		}
		os.Remove(dir)
		if err := os.Rename(real, dir); err != nil {
			blocked("rename %s: %v", real, err)
		}
		os.Rename(dir, real)
	}
	escaped("flipped %s between a directory and a symlink to %s %d times", dir, target, flips)
}
