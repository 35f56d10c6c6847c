package gvisor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

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
	Format    int       `json:"format"` // infoCacheFormat: older files are ignored
	Path      string    `json:"path"`
	Size      int64     `json:"size"`
	ModTime   time.Time `json:"mod_time"`
	Want      string    `json:"want_platform"`
	Version   string    `json:"version"`
	Platforms []string  `json:"platforms"`
	KVMDevice bool      `json:"kvm_device"`
	KVMWorks  bool      `json:"kvm_works"`
	KVM       string    `json:"kvm"`
	// OverlayDir: overlayDirPrefix of this runsc.
	OverlayDir string `json:"overlay_dir"`
}

// infoCacheFormat changes when infoCache gains a field.
const infoCacheFormat = 2

// infoCachePath is the cache file of the runsc at path p: one per binary,
// so that runs with different runscs on PATH do not evict each other.
func infoCachePath(cfg Config, p string) string {
	sum := sha256.Sum256([]byte(p))
	return filepath.Join(cfg.StateDir, "runsc-info-"+hex.EncodeToString(sum[:6])+".json")
}

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
	b, err := os.ReadFile(infoCachePath(cfg, p))
	if err != nil {
		return Info{}, false
	}
	var c infoCache
	if json.Unmarshal(b, &c) != nil || c.Format != infoCacheFormat || c.Path != p || c.Size != fi.Size() || !c.ModTime.Equal(fi.ModTime()) || c.Want != cfg.Platform || c.Version == "" {
		return Info{}, false
	}
	_, err = os.Stat("/dev/kvm")
	if dev := err == nil; dev != c.KVMDevice {
		return Info{}, false // /dev/kvm came or went: look again
	}
	info := Info{Path: p, Version: c.Version, Platforms: c.Platforms, KVMDevice: c.KVMDevice, KVM: c.KVM, overlayDir: c.OverlayDir}
	info.Platform, info.Err = choosePlatform(cfg.Platform, info.Platforms, kvmState{Device: c.KVMDevice, Works: c.KVMWorks})
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
	b, _ := json.Marshal(infoCache{Format: infoCacheFormat, Path: info.Path, Size: fi.Size(), ModTime: fi.ModTime(), Want: cfg.Platform, Version: info.Version,
		Platforms: info.Platforms, KVMDevice: info.KVMDevice, KVMWorks: info.kvmWorks, KVM: info.KVM, OverlayDir: info.overlayDir})
	if os.MkdirAll(cfg.StateDir, 0o700) != nil {
		return
	}
	f, err := os.CreateTemp(cfg.StateDir, ".runsc-info-*")
	if err != nil {
		return
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil && cerr == nil && os.Rename(f.Name(), infoCachePath(cfg, info.Path)) == nil {
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
