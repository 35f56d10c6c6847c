package docker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

// engine returns the client, making it once.
func (b *Backend) engine() (*engine, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn != nil {
		return b.conn, nil
	}
	c, err := newEngine(b.cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("docker client: %v: %w", err, sandbox.ErrUnavailable)
	}
	b.conn = c
	return b.conn, nil
}

// Info asks the daemon what it offers, once per Backend when it answered
// (a daemon that did not is asked again next time).
func (b *Backend) Info(ctx context.Context) Info {
	b.mu.Lock()
	if b.info != nil {
		i := *b.info
		b.mu.Unlock()
		return i
	}
	b.mu.Unlock()
	i := b.queryInfo(ctx)
	if i.Err == nil {
		b.mu.Lock()
		b.info = &i
		b.mu.Unlock()
	}
	return i
}

func (b *Backend) queryInfo(ctx context.Context) Info {
	e, err := b.engine()
	if err != nil {
		return Info{Err: err}
	}
	i := Info{Host: e.host}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := e.Ping(ctx); err != nil {
		i.Err = fmt.Errorf("docker daemon at %s does not answer (install docker.io and start dockerd, e.g. scripts/dockerd.sh): %v: %w", i.Host, err, sandbox.ErrUnavailable)
		return i
	}
	i.APIVersion = e.APIVersion()
	if versionLess(i.APIVersion, minAPIVersion) {
		i.Err = fmt.Errorf("docker daemon at %s speaks Engine API %s; this backend needs %s (dockerd 20.10 or newer): %w", i.Host, i.APIVersion, minAPIVersion, sandbox.ErrUnavailable)
		return i
	}
	info, err := e.Info(ctx)
	if err != nil {
		i.Err = fmt.Errorf("docker daemon at %s: info: %v: %w", i.Host, err, sandbox.ErrUnavailable)
		return i
	}
	i.Version = info.ServerVersion
	i.CgroupDriver, i.CgroupVersion = info.CgroupDriver, info.CgroupVersion
	i.Security = info.SecurityOptions
	i.Runtime = info.DefaultRuntime
	for _, o := range info.SecurityOptions {
		// "name=seccomp,profile=default", "name=userns", "name=rootless".
		name, _, _ := strings.Cut(strings.TrimPrefix(o, "name="), ",")
		switch name {
		case "seccomp":
			i.Seccomp = true
		case "userns":
			i.UsernsRemap = true
		case "rootless":
			i.Rootless = true
		}
	}
	if !i.Seccomp {
		// Without seccomp the kernel's whole surface is open to the
		// container: refuse rather than run weaker than documented.
		i.Err = fmt.Errorf("docker daemon at %s applies no seccomp profiles (built without seccomp): %w", i.Host, sandbox.ErrUnavailable)
	}
	return i
}

// versionLess compares dotted API versions ("1.41" < "1.9" is false).
func versionLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for k := 0; k < max(len(pa), len(pb)); k++ {
		var x, y int
		if k < len(pa) {
			fmt.Sscan(pa[k], &x)
		}
		if k < len(pb) {
			fmt.Sscan(pb[k], &y)
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// Probe reports whether the daemon can run sandboxes: its version and
// security setup and, plainly, that the isolation is a shared kernel.
func (b *Backend) Probe(ctx context.Context) sandbox.Probe {
	i := b.Info(ctx)
	p := sandbox.Probe{Available: i.Err == nil, Isolation: "weak", Details: map[string]string{}}
	if i.Err != nil {
		p.Reason = i.Err.Error()
	}
	set := func(k, v string) {
		if v != "" {
			p.Details[k] = v
		}
	}
	set("daemon", i.Host)
	set("dockerd_version", i.Version)
	set("api_version", i.APIVersion)
	set("cgroup_driver", i.CgroupDriver)
	set("cgroup_version", i.CgroupVersion)
	set("runtime", i.Runtime)
	if i.Err == nil {
		p.Details["seccomp"] = "Docker's default profile tightened with Airlock's rules"
		p.Details["userns_remap"] = "off: root in a container is root on the host kernel (no capabilities, no-new-privileges)"
		if i.UsernsRemap {
			p.Details["userns_remap"] = "on: container uids map to an unprivileged host range"
		}
		if i.Rootless {
			p.Details["rootless"] = "dockerd runs rootless"
		}
		p.Details["isolation"] = "shared kernel: containers run on the host's kernel, so a kernel bug reachable through the allowed system calls is an escape; dockerd runs as root, and whoever reaches its socket is root on the host"
	}
	set("state_dir", b.cfg.StateDir)
	if slices.Contains(i.Security, "name=selinux") {
		p.Details["selinux"] = "on"
	}
	return p
}
