package policy

import (
	"slices"
	"strings"
	"testing"
)

func TestResolveImage(t *testing.T) {
	p, _ := Profile("default")
	p.Filesystem.Image = "debian:bookworm"
	env := testEnv()
	env.Environ = []string{"PATH=/home/alice/bin:/usr/bin", "HOME=/home/alice", "TERM=xterm", "SHELL=/bin/zsh"}
	r, err := p.Resolve(env)
	if err != nil {
		t.Fatal(err)
	}
	fs := r.Filesystem
	if fs.WorkspaceMount != "/workspace" || fs.WorkspaceInside() != "/workspace" || r.Process.Workdir != "/workspace" {
		t.Errorf("workspace mount %q, inside %q, workdir %q; want /workspace", fs.WorkspaceMount, fs.WorkspaceInside(), r.Process.Workdir)
	}
	if fs.Workspace != "/home/alice/proj" {
		t.Errorf("workspace (host) %q", fs.Workspace)
	}
	for _, d := range SystemDirs {
		if slices.Contains(fs.ReadOnly, d) {
			t.Errorf("host system dir %s mounted into an image sandbox", d)
		}
	}
	if slices.Contains(fs.Tmpfs, "/home/alice") {
		t.Errorf("the host home's tmpfs hides the image's: %v", fs.Tmpfs)
	}
	for _, k := range []string{"PATH", "HOME", "SHELL"} {
		if v, ok := r.Process.Env[k]; ok {
			t.Errorf("host %s=%s passed into an image sandbox", k, v)
		}
	}
	if r.Process.Env["TERM"] != "xterm" {
		t.Errorf("TERM not passed: %v", r.Process.Env)
	}
	// process.env still sets what the image owns; an explicit workdir
	// and workspace_mount win.
	p.Process.Env = map[string]string{"PATH": "/opt/bin"}
	p.Process.Workdir = "/srv"
	p.Filesystem.WorkspaceMount = "/home/agent/work/"
	r, err = p.Resolve(env)
	if err != nil {
		t.Fatal(err)
	}
	if r.Process.Env["PATH"] != "/opt/bin" || r.Process.Workdir != "/srv" || r.Filesystem.WorkspaceMount != "/home/agent/work" {
		t.Errorf("explicit settings: env %v workdir %q mount %q", r.Process.Env, r.Process.Workdir, r.Filesystem.WorkspaceMount)
	}
	// No workspace: no mount.
	p2, _ := Profile("strict")
	p2.Filesystem.Image = "busybox"
	if r, err := p2.Resolve(testEnv()); err != nil || r.Filesystem.WorkspaceMount != "" || r.Process.Workdir != "/" {
		t.Errorf("strict+image: %v mount %q workdir %q", err, r.Filesystem.WorkspaceMount, r.Process.Workdir)
	}
}

func TestImagePolicyErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"version: 1\nfilesystem:\n  image: debian\n  rootfs: /srv/root\n", "exclusive"},
		{"version: 1\nfilesystem:\n  image: \"a b\"\n", "not an image reference"},
		{"version: 1\nfilesystem:\n  workspace_mount: work\n", "absolute"},
		{"version: 1\nfilesystem:\n  workspace_mount: /\n", "over /"},
		{"version: 1\nfilesystem:\n  workspace_mount: /proc/x\n", "under /proc"},
	} {
		_, err := Parse("p.yaml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "p.yaml:") {
			t.Errorf("%q: %v, want an error naming the file and saying %q", c.yaml, err, c.want)
		}
	}
}
