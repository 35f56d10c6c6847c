// Package admission holds the rules deciding whether a keyed tenant's
// request is allowed: the operator's ceilings (network rules, limits,
// backends, images, profiles, host and volume paths), how an API
// policy is resolved on the host, and which file operations a sandbox's
// write rules refuse (Protection). A request beyond its tenant's ceiling
// is refused with sandbox.ErrPermission naming the ceiling.
//
// It only decides: it never creates, changes or stores anything, never
// bounds the trusted unix socket's requests (the caller passes a nil
// *Ceiling for those), and knows nothing of HTTP.
package admission

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/airlock-dev/airlock/egress"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/guestpath"
)

// Ceiling is what one tenant's requests may ask for: the operator's bound
// on network rules, limits, backends, images, profiles and host paths. It
// applies to every create (pooled ones included) and to every
// PUT .../network; a request beyond it is refused with 403 naming the
// ceiling. Requests on the trusted unix socket are the operator's own and
// are not bounded.
type Ceiling struct {
	Network NetworkCeiling `yaml:"network" json:"network"`
	Limits  LimitCeiling   `yaml:"limits" json:"limits"`
	// Backends, Images and Profiles a request may name; empty: any the
	// server offers.
	Backends []string `yaml:"backends,omitempty" json:"backends,omitempty"`
	Images   []string `yaml:"images,omitempty" json:"images,omitempty"`
	Profiles []string `yaml:"profiles,omitempty" json:"profiles,omitempty"`
	// HostPaths are host directories below which a keyed request may name
	// filesystem.read_only entries; empty: none (the default).
	HostPaths []string `yaml:"host_paths,omitempty" json:"host_paths,omitempty"`
	// VolumePaths are sandbox directories below which a keyed request
	// may mount named volumes; empty: anywhere the mount rules allow.
	VolumePaths []string `yaml:"volume_paths,omitempty" json:"volume_paths,omitempty"`
}

// NetworkCeiling bounds network rules.
type NetworkCeiling struct {
	// Modes a request may ask (none, allowlist, open); empty: all three.
	Modes []string `yaml:"modes,omitempty" json:"modes,omitempty"`
	// Allow lists the guarded ranges (private, loopback, link-local,
	// metadata, this host's own addresses, ...) a tenant may name in an
	// allow entry: an entry that overlaps a guarded range must lie wholly
	// inside one of these. Empty: no guarded range at all.
	Allow []string `yaml:"allow,omitempty" json:"allow,omitempty"`
	// Requests are HTTP request rules every sandbox of the tenant is held
	// to (as network.bounds): for a host they name, a request must match
	// one of their allow rules, whatever the sandbox's own rules say, and
	// a tenant's allow rule for such a host must lie within one of them.
	Requests []policy.RequestRule `yaml:"requests,omitempty" json:"requests,omitempty"`

	allow    []netip.Prefix
	requests []*policy.CompiledRule
}

// LimitCeiling bounds a sandbox's limits. Max is the most a request may
// ask for; Default fills what a request leaves unset (over the profile's);
// a limit a request asks to remove ("unlimited" or 0) is refused unless
// named in Unlimited. OpenFilesTotal bounds pids × open_files, what one
// sandbox may hold open at most (no kernel limit counts descriptors per
// sandbox).
type LimitCeiling struct {
	Max            policy.Limits `yaml:"max" json:"max"`
	Default        policy.Limits `yaml:"default" json:"default"`
	Unlimited      []string      `yaml:"unlimited,omitempty" json:"unlimited,omitempty"`
	OpenFilesTotal int64         `yaml:"open_files_total,omitempty" json:"open_files_total,omitempty"`
}

// Ceilings are the per-tenant ceilings of a server: Tenants by name, and
// Default for every other tenant.
type Ceilings struct {
	Default Ceiling            `yaml:"default" json:"default"`
	Tenants map[string]Ceiling `yaml:"tenants,omitempty" json:"tenants,omitempty"`
}

// DefaultCeiling is the ceiling of a server started without a ceilings
// file: every network mode, no guarded range, limits no larger than twice
// the coding-agent profile's, none removed but output_bytes (the server
// bounds the output it keeps itself) and at most 1Mi descriptors open per
// sandbox.
func DefaultCeiling() Ceiling {
	return Ceiling{
		Limits: LimitCeiling{
			Max: policy.Limits{
				Memory: 8 << 30, CPUs: float64(max(64, runtime.NumCPU())), Pids: 2048, OpenFiles: 16384,
				Timeout: policy.Duration(24 * 3600e9), OutputBytes: 1 << 30, DiskBytes: 8 << 30,
			},
			// Output is bounded by the server's own buffers anyway.
			Unlimited:      []string{"output_bytes"},
			OpenFilesTotal: 1 << 20,
		},
	}
}

// limitNames are the names of limits in ceilings and messages.
var limitNames = []string{"memory", "cpus", "pids", "open_files", "timeout", "output_bytes", "disk"}

// LoadCeilings reads a ceilings file (YAML or JSON, unknown fields are
// errors). Tenants not listed get Default; a tenant's entry replaces
// Default whole.
func LoadCeilings(path string) (*Ceilings, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ceilings %q: %w: %w", path, err, sandbox.ErrInvalid)
	}
	c := &Ceilings{Default: DefaultCeiling()}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		return nil, fmt.Errorf("ceilings %q: %v: %w", path, err, sandbox.ErrInvalid)
	}
	if err := c.Compile(); err != nil {
		return nil, fmt.Errorf("ceilings %q: %w", path, err)
	}
	return c, nil
}

// Compile checks and prepares every ceiling; LoadCeilings does it, a
// Ceilings built in code needs it once before use.
func (c *Ceilings) Compile() error {
	if err := c.Default.compile("default"); err != nil {
		return err
	}
	for name, t := range c.Tenants {
		if err := t.compile("tenants." + name); err != nil {
			return err
		}
		c.Tenants[name] = t
	}
	return nil
}

func (c *Ceiling) compile(where string) error {
	for _, m := range c.Network.Modes {
		switch m {
		case policy.NetworkNone, policy.NetworkAllowlist, policy.NetworkOpen:
		default:
			return fmt.Errorf("%s.network.modes: %q: want none, allowlist or open: %w", where, m, sandbox.ErrInvalid)
		}
	}
	c.Network.allow = nil
	for _, a := range c.Network.Allow {
		e, err := policy.ParseNetworkEntry(a)
		if err != nil || !e.Prefix.IsValid() || e.Port != 0 {
			return fmt.Errorf("%s.network.allow: %q: want a CIDR or address without a port: %w", where, a, sandbox.ErrInvalid)
		}
		c.Network.allow = append(c.Network.allow, e.Prefix)
	}
	if len(c.Network.Requests) > 0 {
		rs, err := policy.CompileRequests(policy.Network{Bounds: c.Network.Requests})
		if err != nil {
			return fmt.Errorf("%s.network.requests: %w", where, err)
		}
		c.Network.requests = rs.Bounds
	}
	for _, u := range c.Limits.Unlimited {
		if !slices.Contains(limitNames, u) {
			return fmt.Errorf("%s.limits.unlimited: %q: want one of %s: %w", where, u, strings.Join(limitNames, ", "), sandbox.ErrInvalid)
		}
	}
	for _, p := range c.HostPaths {
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("%s.host_paths: %q: want an absolute path: %w", where, p, sandbox.ErrInvalid)
		}
	}
	for _, p := range c.VolumePaths {
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("%s.volume_paths: %q: want an absolute path: %w", where, p, sandbox.ErrInvalid)
		}
	}
	return nil
}

// For returns tenant's ceiling.
func (c *Ceilings) For(tenant string) *Ceiling {
	if t, ok := c.Tenants[tenant]; ok {
		return &t
	}
	return &c.Default
}

// errCeiling is a refusal by the ceiling: 403 naming it.
func errCeiling(tenant, field, format string, args ...any) error {
	return fmt.Errorf("ceiling %s of tenant %q: "+format+": %w", append([]any{field, tenant}, append(args, sandbox.ErrPermission)...)...)
}

// WithDefaults returns raw (a request's inline policy, maybe nil) with
// the ceiling's default limits filled in where it sets none.
func (c *Ceiling) WithDefaults(raw *policy.Policy) *policy.Policy {
	if raw == nil {
		raw = &policy.Policy{Version: policy.Version}
	} else {
		raw = raw.Clone()
	}
	l, d := &raw.Limits, c.Limits.Default
	if l.Memory == 0 {
		l.Memory = d.Memory
	}
	if l.CPUs == 0 {
		l.CPUs = d.CPUs
	}
	if l.Pids == 0 {
		l.Pids = d.Pids
	}
	if l.OpenFiles == 0 {
		l.OpenFiles = d.OpenFiles
	}
	if l.Timeout == 0 {
		l.Timeout = d.Timeout
	}
	if l.OutputBytes == 0 {
		l.OutputBytes = d.OutputBytes
	}
	if l.DiskBytes == 0 {
		l.DiskBytes = d.DiskBytes
	}
	return raw
}

// HasDefaults reports whether the ceiling fills any limit.
func (c *Ceiling) HasDefaults() bool { return c.Limits.Default != (policy.Limits{}) }

// CheckRequest checks what a create names besides its policy.
func (c *Ceiling) CheckRequest(tenant, backend, image, profile string) error {
	if len(c.Backends) > 0 && !slices.Contains(c.Backends, backend) {
		return errCeiling(tenant, "backends", "backend %q not allowed (allowed: %s)", backend, strings.Join(c.Backends, ", "))
	}
	if image != "" && len(c.Images) > 0 && !slices.Contains(c.Images, image) {
		return errCeiling(tenant, "images", "image %q not allowed (allowed: %s)", image, strings.Join(c.Images, ", "))
	}
	if profile == "" {
		profile = "default"
	}
	if len(c.Profiles) > 0 && !slices.Contains(c.Profiles, profile) {
		return errCeiling(tenant, "profiles", "profile %q not allowed (allowed: %s)", profile, strings.Join(c.Profiles, ", "))
	}
	return nil
}

// CheckHostPaths checks a keyed request's read_only entries (the only
// host paths a ceiling can open) against HostPaths.
func (c *Ceiling) CheckHostPaths(tenant string, raw *policy.Policy) error {
	for _, p := range raw.Filesystem.ReadOnly {
		if !strings.HasPrefix(p, "/") || !underAny(p, c.HostPaths) {
			return errCeiling(tenant, "host_paths", "filesystem.read_only %q not below an allowed host path (allowed: %s)", p, listOrNone(c.HostPaths))
		}
	}
	return nil
}

func underAny(p string, roots []string) bool {
	p = cleanAbs(p)
	for _, r := range roots {
		r = cleanAbs(r)
		if p == r || strings.HasPrefix(p, strings.TrimSuffix(r, "/")+"/") {
			return true
		}
	}
	return false
}

func cleanAbs(p string) string {
	c, err := guestpath.Clean(p)
	if err != nil {
		return "/\x00" // matches nothing
	}
	return c
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// checkLimits checks a resolved policy's limits (0 = no limit).
func (c *Ceiling) checkLimits(tenant string, l policy.Limits) error {
	m := c.Limits.Max
	type lim struct {
		name     string
		val, max float64
		show     func(float64) string
	}
	size := func(v float64) string { return policy.ByteSize(int64(v)).String() }
	num := func(v float64) string { return fmt.Sprint(v) }
	dur := func(v float64) string { return policy.Duration(int64(v)).String() }
	for _, x := range []lim{
		{"memory", float64(l.Memory), float64(m.Memory), size},
		{"cpus", l.CPUs, m.CPUs, num},
		{"pids", float64(l.Pids), float64(m.Pids), num},
		{"open_files", float64(l.OpenFiles), float64(m.OpenFiles), num},
		{"timeout", float64(l.Timeout), float64(m.Timeout), dur},
		{"output_bytes", float64(l.OutputBytes), float64(m.OutputBytes), size},
		{"disk", float64(l.DiskBytes), float64(m.DiskBytes), size},
	} {
		if x.val <= 0 {
			if !slices.Contains(c.Limits.Unlimited, x.name) {
				return errCeiling(tenant, "limits.unlimited", "limits.%s: no limit (0 or unlimited) is not allowed", x.name)
			}
			continue
		}
		if x.max > 0 && x.val > x.max {
			return errCeiling(tenant, "limits.max."+x.name, "limits.%s %s: more than %s", x.name, x.show(x.val), x.show(x.max))
		}
	}
	if t := c.Limits.OpenFilesTotal; t > 0 && l.Pids > 0 && l.OpenFiles > 0 && int64(l.Pids)*int64(l.OpenFiles) > t {
		return errCeiling(tenant, "limits.open_files_total", "limits.pids × limits.open_files = %d × %d: more than %d descriptors", l.Pids, l.OpenFiles, t)
	}
	return nil
}

// checkNetwork checks network rules a tenant asks for (at create and at
// PUT .../network).
// own gives the host's addresses; it is called only for an allow entry
// that names addresses (a host name is checked by the guard at connect).
func (c *Ceiling) checkNetwork(tenant string, n policy.Network, own func() ([]netip.Addr, error)) error {
	mode := n.Mode
	if mode == "" {
		mode = policy.NetworkNone
	}
	if len(c.Network.Modes) > 0 && !slices.Contains(c.Network.Modes, mode) {
		return errCeiling(tenant, "network.modes", "network mode %q not allowed (allowed: %s)", mode, strings.Join(c.Network.Modes, ", "))
	}
	if err := c.checkRequests(tenant, n); err != nil {
		return err
	}
	for _, a := range n.Allow {
		e, err := policy.ParseNetworkEntry(a)
		if err != nil {
			return fmt.Errorf("network.allow: %w", err)
		}
		if !e.Prefix.IsValid() {
			continue // a name: the guard checks every address it resolves to
		}
		addrs, err := own()
		if err != nil {
			return fmt.Errorf("ceiling: host addresses: %v: %w", err, sandbox.ErrUnavailable)
		}
		why := egress.GuardedOverlap(e.Prefix, addrs)
		if why == "" {
			continue
		}
		ok := false
		for _, p := range c.Network.allow {
			if p.Bits() <= e.Prefix.Bits() && p.Contains(e.Prefix.Addr()) {
				ok = true
				break
			}
		}
		if !ok {
			return errCeiling(tenant, "network.allow", "network.allow %q reaches %s, which this tenant may not name (allowed guarded ranges: %s)", a, why, listOrNone(c.Network.Allow))
		}
	}
	return nil
}

// checkRequests refuses a tenant's allow rule (git preset included) for a
// host the ceiling has request rules for, unless one of them covers it.
// The proxy enforces the ceiling's rules anyway (as bounds); this says so
// at create instead of at the first refused request.
func (c *Ceiling) checkRequests(tenant string, n policy.Network) error {
	if len(c.Network.requests) == 0 {
		return nil
	}
	rs, err := policy.CompileRequests(n)
	if err != nil {
		return fmt.Errorf("network.requests: %w", err)
	}
	for _, r := range rs.Rules {
		if !r.Allow() {
			continue
		}
		named, covered := false, false
		for _, b := range c.Network.requests {
			if b.Entry.Host == r.Entry.Host || b.Entry.Wildcard && strings.HasSuffix(r.Entry.Host, "."+b.Entry.Host) {
				named = true
				covered = covered || b.Allow() && b.Covers(r)
			}
		}
		if named && !covered {
			return errCeiling(tenant, "network.requests", "request rule %q is wider than this tenant's ceiling allows for %s", r.Rule.String(), r.Entry.Host)
		}
	}
	return nil
}

// bound adds the ceiling's request rules to pol as bounds the proxy enforces.
func (c *Ceiling) bound(pol *policy.Policy) {
	pol.Network.Bounds = append(pol.Network.Bounds, c.Network.Requests...)
}

// checkPolicy checks a resolved policy of a keyed tenant's sandbox.
func (c *Ceiling) checkPolicy(tenant string, pol *policy.Policy, own func() ([]netip.Addr, error)) error {
	if err := c.checkLimits(tenant, pol.Limits); err != nil {
		return err
	}
	return c.checkNetwork(tenant, pol.Network, own)
}

// ClampUnset brings limits the request did not set (the profile's) within
// the ceiling: above its maximum, or removed where that is not allowed,
// they become the maximum. Only what a request asks for itself is
// refused.
func (c *Ceiling) ClampUnset(raw, pol *policy.Policy) {
	var r policy.Limits
	if raw != nil {
		r = raw.Limits
	}
	l, m := &pol.Limits, c.Limits.Max
	unl := func(name string) bool { return slices.Contains(c.Limits.Unlimited, name) }
	clampI := func(set bool, v *int64, max int64, name string) {
		if !set && max > 0 && (*v > max || *v <= 0 && !unl(name)) {
			*v = max
		}
	}
	mem, out, disk := int64(l.Memory), int64(l.OutputBytes), int64(l.DiskBytes)
	clampI(r.Memory != 0, &mem, int64(m.Memory), "memory")
	clampI(r.OutputBytes != 0, &out, int64(m.OutputBytes), "output_bytes")
	clampI(r.DiskBytes != 0, &disk, int64(m.DiskBytes), "disk")
	l.Memory, l.OutputBytes, l.DiskBytes = policy.ByteSize(mem), policy.ByteSize(out), policy.ByteSize(disk)
	pids, of, to := int64(l.Pids), int64(l.OpenFiles), int64(l.Timeout)
	clampI(r.Pids != 0, &pids, int64(m.Pids), "pids")
	clampI(r.OpenFiles != 0, &of, int64(m.OpenFiles), "open_files")
	clampI(r.Timeout != 0, &to, int64(m.Timeout), "timeout")
	l.Pids, l.OpenFiles, l.Timeout = int(pids), int(of), policy.Duration(to)
	if r.CPUs == 0 && m.CPUs > 0 && (l.CPUs > m.CPUs || l.CPUs <= 0 && !unl("cpus")) {
		l.CPUs = m.CPUs
	}
}

// ClampOpenFiles lowers an open_files that raw does not set so that
// pids × open_files fits OpenFilesTotal.
func (c *Ceiling) ClampOpenFiles(raw, pol *policy.Policy) {
	l := &pol.Limits
	if t := c.Limits.OpenFilesTotal; t > 0 && l.Pids > 0 && (raw == nil || raw.Limits.OpenFiles == 0) &&
		int64(l.Pids)*int64(max(l.OpenFiles, 0)) > t {
		l.OpenFiles = int(t / int64(l.Pids))
	}
}

// Fit checks a resolved policy against c (nil: nothing to check). An
// open_files the request did not set is lowered to fit OpenFilesTotal
// first: the ceiling bounds what a sandbox holds, not the profile's
// per-process default.
func (c *Ceiling) Fit(tenant string, raw, pol *policy.Policy) error {
	if c == nil {
		return nil
	}
	c.ClampUnset(raw, pol)
	c.ClampOpenFiles(raw, pol)
	if err := c.checkPolicy(tenant, pol, hostAddrs()); err != nil {
		return err
	}
	c.bound(pol)
	return nil
}

// CheckNetwork checks the rules of a PUT .../network against c (nil:
// nothing to check).
func (c *Ceiling) CheckNetwork(tenant string, n policy.Network) error {
	if c == nil {
		return nil
	}
	return c.checkNetwork(tenant, n, hostAddrs())
}

// hostAddrs reads the host's interface addresses on first use, once per
// check: a policy naming no address (most do) costs no netlink dump.
func hostAddrs() func() ([]netip.Addr, error) {
	return sync.OnceValues(egress.HostAddrs)
}

// CheckVolumePath checks the path volume mount i of a create asks for
// against c's VolumePaths (nil or none: any path).
func (c *Ceiling) CheckVolumePath(tenant string, i int, p string) error {
	if c != nil && len(c.VolumePaths) > 0 && !underAny(p, c.VolumePaths) {
		return errCeiling(tenant, "volume_paths", "volumes[%d].path %q not below an allowed path (allowed: %s)", i, p, strings.Join(c.VolumePaths, ", "))
	}
	return nil
}
