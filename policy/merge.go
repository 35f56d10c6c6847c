package policy

import "maps"

// Merge returns over layered on base; neither is modified. The rule, the
// same for profiles under files and for flags over files:
//   - lists append (base first, then over's entries);
//   - maps (process.env) merge key by key, over winning;
//   - scalars, pointers and limits override when over sets them (a non-zero
//     value; Unlimited counts as set, so "unlimited" removes a profile's
//     limit);
//   - allow_degraded: true in either wins (it can only be switched on).
//
// Version is over's when set. The result remembers over's source lines
// (or base's when over has none, e.g. flags over a file).
func Merge(base, over *Policy) *Policy {
	out := base.Clone()
	if over == nil {
		return out
	}
	o := over.Clone()
	if o.Version != 0 {
		out.Version = o.Version
	}
	str(&out.Profile, o.Profile)
	str(&out.Backend, o.Backend)
	str(&out.Isolation, o.Isolation)
	out.AllowDegraded = out.AllowDegraded || o.AllowDegraded

	off := map[string]int{
		"filesystem.read_only":       len(out.Filesystem.ReadOnly),
		"filesystem.read_write":      len(out.Filesystem.ReadWrite),
		"filesystem.deny":            len(out.Filesystem.Deny),
		"filesystem.tmpfs":           len(out.Filesystem.Tmpfs),
		"filesystem.writable_config": len(out.Filesystem.WritableConfig),
		"caches":                     len(out.Caches),
		"network.allow":              len(out.Network.Allow),
		"network.deny":               len(out.Network.Deny),
		"process.env_allow":          len(out.Process.EnvAllow),
		"secrets":                    len(out.Secrets),
	}

	mergeFilesystem(&out.Filesystem, &o.Filesystem)
	out.Caches = append(out.Caches, o.Caches...)
	str(&out.Network.Mode, o.Network.Mode)
	out.Network.Allow = append(out.Network.Allow, o.Network.Allow...)
	out.Network.Deny = append(out.Network.Deny, o.Network.Deny...)
	out.Network.Requests = append(out.Network.Requests, o.Network.Requests...)
	out.Network.Budgets = append(out.Network.Budgets, o.Network.Budgets...)
	out.Network.Bounds = append(out.Network.Bounds, o.Network.Bounds...)
	if o.Network.Git != nil {
		out.Network.Git = o.Network.Git.merged(out.Network.Git)
	}
	mergeProcess(&out.Process, &o.Process)
	mergeLimits(&out.Limits, &o.Limits)
	out.Secrets = append(out.Secrets, o.Secrets...)
	str(&out.Audit.File, o.Audit.File)

	if o.src != nil {
		out.src = o.src.shifted(off)
	}
	return out
}

// mergeFilesystem layers ofs over fs (see Merge).
func mergeFilesystem(fs, ofs *Filesystem) {
	str(&fs.Rootfs, ofs.Rootfs)
	str(&fs.Image, ofs.Image)
	str(&fs.WorkspaceMount, ofs.WorkspaceMount)
	str(&fs.Workspace, ofs.Workspace)
	fs.ReadOnly = append(fs.ReadOnly, ofs.ReadOnly...)
	fs.ReadWrite = append(fs.ReadWrite, ofs.ReadWrite...)
	fs.Deny = append(fs.Deny, ofs.Deny...)
	fs.Tmpfs = append(fs.Tmpfs, ofs.Tmpfs...)
	if ofs.ProtectConfig != nil {
		fs.ProtectConfig = ofs.ProtectConfig
	}
	fs.WritableConfig = append(fs.WritableConfig, ofs.WritableConfig...)
}

// mergeProcess layers opr over pr (see Merge).
func mergeProcess(pr, opr *Process) {
	pr.EnvAllow = append(pr.EnvAllow, opr.EnvAllow...)
	if len(opr.Env) > 0 {
		if pr.Env == nil {
			pr.Env = map[string]string{}
		}
		maps.Copy(pr.Env, opr.Env)
	}
	str(&pr.Workdir, opr.Workdir)
	// "none" wins over "default" whichever layer says it: a later layer
	// (a tenant's request over an operator's policy) never regains
	// capabilities an earlier one took away.
	if pr.Capabilities != CapabilitiesNone {
		str(&pr.Capabilities, opr.Capabilities)
	}
	if opr.UID != nil {
		pr.UID = opr.UID
	}
	if opr.GID != nil {
		pr.GID = opr.GID
	}
}

// mergeLimits layers ol over l: each limit over sets overrides (see Merge).
func mergeLimits(l, ol *Limits) {
	if ol.Memory != 0 {
		l.Memory = ol.Memory
	}
	if ol.CPUs != 0 {
		l.CPUs = ol.CPUs
	}
	if ol.Pids != 0 {
		l.Pids = ol.Pids
	}
	if ol.OpenFiles != 0 {
		l.OpenFiles = ol.OpenFiles
	}
	if ol.Timeout != 0 {
		l.Timeout = ol.Timeout
	}
	if ol.OutputBytes != 0 {
		l.OutputBytes = ol.OutputBytes
	}
	if ol.DiskBytes != 0 {
		l.DiskBytes = ol.DiskBytes
	}
}

func str(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}

// Clone returns a deep copy of p.
func (p *Policy) Clone() *Policy {
	if p == nil {
		return &Policy{}
	}
	c := *p
	c.Filesystem.ReadOnly = cloneStrings(p.Filesystem.ReadOnly)
	c.Filesystem.ReadWrite = cloneStrings(p.Filesystem.ReadWrite)
	c.Filesystem.Deny = cloneStrings(p.Filesystem.Deny)
	c.Filesystem.Tmpfs = cloneStrings(p.Filesystem.Tmpfs)
	c.Filesystem.WritableConfig = cloneStrings(p.Filesystem.WritableConfig)
	c.Caches = cloneStrings(p.Caches)
	if p.Filesystem.ProtectConfig != nil {
		b := *p.Filesystem.ProtectConfig
		c.Filesystem.ProtectConfig = &b
	}
	c.Network.Allow = cloneStrings(p.Network.Allow)
	c.Network.Deny = cloneStrings(p.Network.Deny)
	c.Network.Requests = cloneRules(p.Network.Requests)
	c.Network.Bounds = cloneRules(p.Network.Bounds)
	c.Network.Budgets = append([]Budget(nil), p.Network.Budgets...)
	if p.Network.Git != nil {
		c.Network.Git = p.Network.Git.merged(nil)
	}
	c.Process.EnvAllow = cloneStrings(p.Process.EnvAllow)
	if p.Process.Env != nil {
		c.Process.Env = maps.Clone(p.Process.Env)
	}
	if p.Process.UID != nil {
		u := *p.Process.UID
		c.Process.UID = &u
	}
	if p.Process.GID != nil {
		g := *p.Process.GID
		c.Process.GID = &g
	}
	if p.Secrets != nil {
		c.Secrets = make([]Secret, len(p.Secrets))
		for i, s := range p.Secrets {
			s.Hosts = cloneStrings(s.Hosts)
			c.Secrets[i] = s
		}
	}
	return &c
}

func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s...)
}
