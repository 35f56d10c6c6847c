package policy

import (
	"fmt"
	"sort"
	"strings"
)

// SystemDirs are the host directories the built-in profiles mount
// read-only. Those missing on the host are skipped by Resolve, and none is
// mounted when the policy sets a rootfs (the rootfs provides them).
var SystemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}

// DefaultEnvAllow is the environment allow-list of the built-in profiles.
var DefaultEnvAllow = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL",
	"LANG", "LANGUAGE", "LC_*", "TZ",
	"TERM", "COLORTERM", "NO_COLOR", "COLUMNS", "LINES",
}

// etcDeny are host files under /etc no sandbox needs to read (password
// hashes, sudo rules). Skipped by Resolve when missing.
var etcDeny = []string{"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/sudoers.d"}

// agentConfig are the coding agents' own state under $HOME, writable in the
// coding-agent profile. Skipped by Resolve when missing (create them, or
// run the agent once outside, to keep its login and settings).
var agentConfig = []string{
	"~/.claude", "~/.claude.json", "~/.config/claude", // Claude Code
	"~/.codex", // OpenAI Codex CLI
}

// optionalPaths are built-in profile paths dropped by Resolve when they do
// not exist on the host (a missing path the user lists is an error for the
// backend to report, not silently skipped).
var optionalPaths = func() map[string]bool {
	m := map[string]bool{}
	for _, l := range [][]string{SystemDirs, etcDeny, agentConfig, {"~"}} {
		for _, p := range l {
			m[p] = true
		}
	}
	return m
}()

type profile struct {
	doc  string
	make func() *Policy
}

var profiles = map[string]profile{
	"default": {
		doc:  "untrusted agent: host system dirs read-only, workspace (current dir) read-write, empty private home and /tmp, no network, scrubbed env, limits set",
		make: defaultProfile,
	},
	"coding-agent": {
		doc:  "Claude Code / Codex style agent: default plus its config dirs under $HOME writable and the model APIs reachable (through the egress proxy)",
		make: codingAgentProfile,
	},
	"strict": {
		doc:  "no workspace, no network, tight limits: for running a snippet of untrusted code",
		make: strictProfile,
	},
}

// Profiles returns the names of the built-in profiles, sorted.
func Profiles() []string {
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ProfileDoc returns a one-line description of a built-in profile.
func ProfileDoc(name string) string { return profiles[name].doc }

// Profile returns a fresh copy of the built-in profile name. An unknown
// name is an ErrInvalid error listing the known ones.
func Profile(name string) (*Policy, error) {
	pr, ok := profiles[name]
	if !ok {
		return nil, &Error{Msg: fmt.Sprintf("unknown profile %q (known: %s)", name, strings.Join(Profiles(), ", "))}
	}
	p := pr.make()
	p.Version = Version
	p.Profile = name
	return p, nil
}

func boolPtr(b bool) *bool { return &b }

func defaultProfile() *Policy {
	return &Policy{
		Filesystem: Filesystem{
			ReadOnly:      cloneStrings(SystemDirs),
			Deny:          cloneStrings(etcDeny),
			Tmpfs:         []string{"/tmp", "~"},
			ProtectConfig: boolPtr(true),
		},
		// Network mode left empty: Resolve makes it none, or allowlist
		// when a file layered on this profile adds allow entries.
		Process: Process{EnvAllow: cloneStrings(DefaultEnvAllow)},
		Limits: Limits{
			Memory:      2 << 30,
			CPUs:        2,
			Pids:        512,
			OpenFiles:   4096,
			Timeout:     Duration(4 * 3600e9),
			OutputBytes: 1 << 30,
			DiskBytes:   1 << 30,
		},
	}
}

func codingAgentProfile() *Policy {
	p := defaultProfile()
	p.Filesystem.ReadWrite = cloneStrings(agentConfig)
	p.Network = Network{
		Mode: NetworkAllowlist,
		Allow: []string{
			"api.anthropic.com:443", "console.anthropic.com:443", // Claude API and its OAuth token refresh
			"api.openai.com:443", "auth.openai.com:443", "chatgpt.com:443", // OpenAI API, Codex login, ChatGPT-plan Codex
		},
	}
	p.Process.EnvAllow = append(p.Process.EnvAllow,
		"EDITOR", "VISUAL", "FORCE_COLOR",
		"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
		"CLAUDE_*", "ANTHROPIC_*", "CODEX_*", "OPENAI_*", // secret-looking ones (…_KEY, …_TOKEN) are still dropped
	)
	// Build and package caches persist per user (airlock's own store,
	// never the host's): a Go build with one dependency otherwise pays a
	// cold module download and build cache on every run.
	p.Caches = CacheNames()
	p.Limits = Limits{
		Memory:      4 << 30,
		CPUs:        4,
		Pids:        1024,
		OpenFiles:   8192,
		Timeout:     Duration(8 * 3600e9),
		OutputBytes: 0, // an interactive session redraws its terminal for hours
		DiskBytes:   4 << 30,
	}
	return p
}

func strictProfile() *Policy {
	p := defaultProfile()
	p.Filesystem.Workspace = "none"
	p.Limits = Limits{
		Memory:      512 << 20,
		CPUs:        1,
		Pids:        128,
		OpenFiles:   1024,
		Timeout:     Duration(600e9),
		OutputBytes: 16 << 20,
		DiskBytes:   256 << 20,
	}
	return p
}
