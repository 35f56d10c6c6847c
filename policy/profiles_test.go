package policy

import (
	"errors"
	"path"
	"slices"
	"strings"
	"testing"
)

func TestProfiles(t *testing.T) {
	names := Profiles()
	if !slices.Equal(names, []string{"coding-agent", "default", "strict"}) {
		t.Errorf("Profiles() = %q", names)
	}
	for _, n := range names {
		p, err := Profile(n)
		if err != nil {
			t.Fatal(err)
		}
		if p.Profile != n || p.Version != Version || ProfileDoc(n) == "" {
			t.Errorf("profile %s: name %q version %d", n, p.Profile, p.Version)
		}
		if err := p.Validate(); err != nil {
			t.Errorf("profile %s invalid: %v", n, err)
		}
		r, err := p.Resolve(testEnv())
		if err != nil {
			t.Fatalf("profile %s: %v", n, err)
		}
		checkUntrusted(t, n, r)
		// Each call returns a fresh copy.
		p.Filesystem.ReadOnly[0] = "/mutated"
		q, _ := Profile(n)
		if q.Filesystem.ReadOnly[0] == "/mutated" {
			t.Errorf("profile %s shares state between calls", n)
		}
	}
	_, err := Profile("yolo")
	if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "known: coding-agent, default, strict") {
		t.Errorf("unknown profile: %v", err)
	}
}

// checkUntrusted asserts what every built-in profile promises.
func checkUntrusted(t *testing.T, name string, r *Policy) {
	t.Helper()
	fs := r.Filesystem
	visible := append(append([]string{}, fs.ReadOnly...), fs.ReadWrite...)
	for _, p := range visible {
		for _, hidden := range []string{"/home", "/root", "/var", "/run", "/srv", "/mnt", "/media", "/proc", "/sys", "/"} {
			if p == hidden {
				t.Errorf("profile %s exposes %s", name, p)
			}
		}
		if strings.HasPrefix(p, "/home/alice/") && !slices.Contains(agentConfigResolved("/home/alice"), p) {
			t.Errorf("profile %s exposes %s of $HOME", name, p)
		}
	}
	if !slices.Contains(fs.Tmpfs, "/tmp") || !slices.Contains(fs.Tmpfs, "/home/alice") {
		t.Errorf("profile %s tmpfs = %q, want a private /tmp and home", name, fs.Tmpfs)
	}
	if fs.ProtectConfig == nil || !*fs.ProtectConfig {
		t.Errorf("profile %s does not protect config", name)
	}
	if r.Network.Mode == NetworkOpen {
		t.Errorf("profile %s opens the network", name)
	}
	if r.Limits.Memory == 0 || r.Limits.Pids == 0 || r.Limits.OpenFiles == 0 || r.Limits.Timeout == 0 || r.Limits.CPUs == 0 {
		t.Errorf("profile %s limits %+v", name, r.Limits)
	}
	if r.AllowDegraded {
		t.Errorf("profile %s allows degraded", name)
	}
}

func agentConfigResolved(home string) []string {
	var out []string
	for _, p := range agentConfig {
		out = append(out, path.Join(home, strings.TrimPrefix(p, "~")))
	}
	return out
}

func TestDefaultProfileIsSafe(t *testing.T) {
	p, _ := Profile("default")
	r, err := p.Resolve(testEnv())
	if err != nil {
		t.Fatal(err)
	}
	if r.Network.Mode != NetworkNone || len(r.Network.Allow) != 0 {
		t.Errorf("network = %+v", r.Network)
	}
	if len(r.Filesystem.ReadWrite) != 0 {
		t.Errorf("read_write = %q; only the workspace may be writable", r.Filesystem.ReadWrite)
	}
	if r.Filesystem.Workspace != "/home/alice/proj" {
		t.Errorf("workspace = %q", r.Filesystem.Workspace)
	}
}

func TestCodingAgentProfile(t *testing.T) {
	p, _ := Profile("coding-agent")
	r, err := p.Resolve(testEnv("/home/alice/.codex", "/home/alice/.config/claude"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Filesystem.ReadWrite, []string{"/home/alice/.claude", "/home/alice/.claude.json"}) {
		t.Errorf("read_write = %q, want the existing agent config only", r.Filesystem.ReadWrite)
	}
	if r.Network.Mode != NetworkAllowlist || !slices.Contains(r.Network.Allow, "api.anthropic.com:443") || !slices.Contains(r.Network.Allow, "api.openai.com:443") {
		t.Errorf("network = %+v", r.Network)
	}
}

func TestStrictProfile(t *testing.T) {
	p, _ := Profile("strict")
	d, _ := Profile("default")
	r, _ := p.Resolve(testEnv())
	if r.Filesystem.Workspace != "none" || r.Network.Mode != NetworkNone {
		t.Errorf("strict: workspace %q network %q", p.Filesystem.Workspace, p.Network.Mode)
	}
	if p.Limits.Memory >= d.Limits.Memory || p.Limits.Pids >= d.Limits.Pids || p.Limits.Timeout >= d.Limits.Timeout {
		t.Errorf("strict limits %+v not tighter than default %+v", p.Limits, d.Limits)
	}
}
