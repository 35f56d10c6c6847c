package policy

import (
	"path"
	"slices"
)

// Cache is a tool cache a policy can name (`caches: [go]`, `--cache go`):
// kept between runs in Airlock's own per-user store, never the host's own
// cache directory (an agent must not be able to poison what the host's
// tools later trust), and mounted where the tool looks for it inside.
type Cache struct {
	Name string
	// Home are the directories, relative to $HOME, the tool keeps it in.
	Home []string
}

var caches = []Cache{
	{"cargo", []string{".cargo/registry", ".cargo/git"}},
	{"go", []string{".cache/go-build", "go/pkg/mod"}},
	{"npm", []string{".npm"}},
	{"pip", []string{".cache/pip"}},
}

// CacheNames returns the names of the known caches, sorted.
func CacheNames() []string {
	out := make([]string, len(caches))
	for i, c := range caches {
		out[i] = c.Name
	}
	return out
}

// LookupCache returns the cache called name.
func LookupCache(name string) (Cache, bool) {
	i := slices.IndexFunc(caches, func(c Cache) bool { return c.Name == name })
	if i < 0 {
		return Cache{}, false
	}
	c := caches[i]
	c.Home = slices.Clone(c.Home)
	return c, true
}

// ConfigGuard returns the write rules of a resolved policy: protect_config
// on or off, the homes (the workspace root, and home, the caller's $HOME,
// when not ""), writable_config, and the secret files pinned. Callers add
// what only they know to Pinned (the policy file, the airlock binary).
func (p *Policy) ConfigGuard(home string) *ConfigGuard {
	g := &ConfigGuard{
		Config:   p.Filesystem.ProtectConfig == nil || *p.Filesystem.ProtectConfig,
		Writable: slices.Clone(p.Filesystem.WritableConfig),
		Pinned:   map[string]string{},
	}
	if ws := p.Filesystem.WorkspacePath(); ws != "" {
		g.Homes = append(g.Homes, ws)
	}
	if home != "" && isAbs(home) && !slices.Contains(g.Homes, path.Clean(home)) {
		g.Homes = append(g.Homes, path.Clean(home))
	}
	for _, s := range p.Secrets {
		if s.FromFile != "" {
			g.Pinned[s.FromFile] = "secret file of " + s.Name
		}
	}
	return g
}
