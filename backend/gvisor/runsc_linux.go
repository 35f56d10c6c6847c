package gvisor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

// debianPackage names what to install when runsc is missing.
const debianPackage = "runsc"

// Info returns what runsc offers on this host (found once per Backend).
// Info.Err says why sandboxes cannot be created.
func (b *Backend) Info(ctx context.Context) Info {
	b.infoOnce.Do(func() {
		// Asking runsc costs two process starts; a one-shot `airlock run`
		// reuses what an earlier one found for the same runsc binary.
		if info, ok := readInfoCache(b.cfg); ok {
			b.info = info
			return
		}
		b.info = discover(ctx, b.cfg)
		writeInfoCache(b.cfg, b.info)
	})
	return b.info
}

// infoCache is what the state dir remembers about one runsc binary.
type infoCache struct {
	Path      string    `json:"path"`
	Size      int64     `json:"size"`
	ModTime   time.Time `json:"mod_time"`
	Want      string    `json:"want_platform"`
	Version   string    `json:"version"`
	Platforms []string  `json:"platforms"`
}

func infoCachePath(cfg Config) string { return filepath.Join(cfg.StateDir, "runsc-info.json") }

func readInfoCache(cfg Config) (Info, bool) {
	if os.Geteuid() != 0 {
		return Info{}, false
	}
	p, err := exec.LookPath(cfg.Runsc)
	if err != nil {
		return Info{}, false
	}
	fi, err := os.Stat(p)
	if err != nil {
		return Info{}, false
	}
	b, err := os.ReadFile(infoCachePath(cfg))
	if err != nil {
		return Info{}, false
	}
	var c infoCache
	if json.Unmarshal(b, &c) != nil || c.Path != p || c.Size != fi.Size() || !c.ModTime.Equal(fi.ModTime()) || c.Want != cfg.Platform || c.Version == "" {
		return Info{}, false
	}
	info := Info{Path: p, Version: c.Version, Platforms: c.Platforms}
	_, err = os.Stat("/dev/kvm")
	info.KVMDevice = err == nil
	info.Platform, info.Err = choosePlatform(cfg.Platform, info.Platforms, info.KVMDevice)
	return info, info.Err == nil
}

func writeInfoCache(cfg Config, info Info) {
	if info.Err != nil || info.Path == "" {
		return
	}
	fi, err := os.Stat(info.Path)
	if err != nil {
		return
	}
	b, _ := json.Marshal(infoCache{Path: info.Path, Size: fi.Size(), ModTime: fi.ModTime(), Want: cfg.Platform, Version: info.Version, Platforms: info.Platforms})
	if os.MkdirAll(cfg.StateDir, 0o700) != nil {
		return
	}
	f, err := os.CreateTemp(cfg.StateDir, ".runsc-info-*")
	if err != nil {
		return
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil && cerr == nil && os.Rename(f.Name(), infoCachePath(cfg)) == nil {
		return
	}
	os.Remove(f.Name())
}

// RunscInfo reports the runsc at path ("" = from PATH) as the backend would
// use it with platform ("" = best available): version, platforms and the
// chosen one, or the error. For `airlock doctor`.
func RunscInfo(ctx context.Context, path, platform string) Info {
	if path == "" {
		path = "runsc"
	}
	return discover(ctx, Config{Runsc: path, Platform: platform})
}

func discover(ctx context.Context, cfg Config) Info {
	var info Info
	_, err := os.Stat("/dev/kvm")
	info.KVMDevice = err == nil
	p, err := exec.LookPath(cfg.Runsc)
	if err != nil {
		info.Err = fmt.Errorf("runsc %q not found (install the Debian package %q: apt-get install %s): %w",
			cfg.Runsc, debianPackage, debianPackage, sandbox.ErrUnavailable)
		return info
	}
	info.Path = p
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, p, "--version").Output()
	if err != nil {
		info.Err = fmt.Errorf("runsc %s --version: %v: %w", p, err, sandbox.ErrUnavailable)
		return info
	}
	info.Version, _, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
	// `runsc flags` describes -platform with the platforms built in.
	var buf bytes.Buffer
	cmd := exec.CommandContext(ctx, p, "flags")
	cmd.Stdout, cmd.Stderr = &buf, &buf
	_ = cmd.Run() // exits 0 or 2 depending on the version; the text is what counts
	info.Platforms = parsePlatforms(buf.String())
	info.Platform, info.Err = choosePlatform(cfg.Platform, info.Platforms, info.KVMDevice)
	if info.Err == nil && os.Geteuid() != 0 {
		info.Err = fmt.Errorf("runsc needs root to create sandboxes (rootless runsc cannot apply cgroup limits): %w", sandbox.ErrUnavailable)
	}
	return info
}

var platformFlag = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?m)^\s*-platform\s.*\n\s*(.*)$`) })

// parsePlatforms reads the platform names from `runsc flags` output, e.g.
// "specifies which platform to use: ptrace (default), kvm.".
func parsePlatforms(flags string) []string {
	m := platformFlag().FindStringSubmatch(flags)
	if m == nil {
		return nil
	}
	_, list, ok := strings.Cut(m[1], ":")
	if !ok {
		return nil
	}
	var out []string
	for _, f := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == '.' || r == ' ' || r == '(' || r == ')' }) {
		switch f {
		case PlatformPtrace, PlatformSystrap, PlatformKVM:
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// choosePlatform picks the platform: the one asked for if this runsc and
// host have it, else systrap, else ptrace. KVM is never chosen
// automatically: a runsc whose KVM platform does not work on this host
// (nested virtualisation, old runsc) hangs instead of failing.
func choosePlatform(want string, have []string, kvm bool) (string, error) {
	if len(have) == 0 {
		have = []string{PlatformPtrace} // every runsc has ptrace
	}
	switch want {
	case PlatformAuto:
		if slices.Contains(have, PlatformSystrap) {
			return PlatformSystrap, nil
		}
		if slices.Contains(have, PlatformPtrace) {
			return PlatformPtrace, nil
		}
		return "", fmt.Errorf("runsc offers no usable platform (has %s): %w", strings.Join(have, ", "), sandbox.ErrUnavailable)
	case PlatformPtrace, PlatformSystrap, PlatformKVM:
		if !slices.Contains(have, want) {
			return "", fmt.Errorf("runsc platform %q not built into this runsc (has %s): %w", want, strings.Join(have, ", "), sandbox.ErrUnavailable)
		}
		if want == PlatformKVM && !kvm {
			return "", fmt.Errorf("runsc platform kvm needs /dev/kvm: %w", sandbox.ErrUnavailable)
		}
		return want, nil
	default:
		return "", fmt.Errorf("runsc platform %q unknown (ptrace, systrap, kvm): %w", want, sandbox.ErrInvalid)
	}
}

// globalArgs are the runsc flags every invocation for one backend shares.
func (b *Backend) globalArgs(platform string) []string {
	return []string{"--root", b.runscRoot(), "--network=none", "--oci-seccomp", "--platform=" + platform}
}

func (b *Backend) runscRoot() string          { return b.cfg.StateDir + "/runsc" }
func (b *Backend) bundleRoot() string         { return b.cfg.StateDir + "/bundles" }
func (b *Backend) bundleDir(id string) string { return b.bundleRoot() + "/" + id }

// runsc runs one short runsc subcommand and returns its combined output.
func (b *Backend) runsc(ctx context.Context, args ...string) ([]byte, error) {
	info := b.Info(ctx)
	if info.Path == "" {
		return nil, info.Err
	}
	platform := info.Platform
	if platform == "" {
		platform = PlatformPtrace
	}
	cmd := exec.CommandContext(ctx, info.Path, append(b.globalArgs(platform), args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("runsc %s: %v: %s", args[0], err, bytes.TrimSpace(out))
	}
	return out, nil
}
