// Package bootproto is the microvm boot exchange on the agent channel,
// before the agent protocol starts: the host sends the guest's init the
// filesystem to build, the clock, entropy and limits; the init answers
// when the sandbox is set up. Both sides import it; the guest never trusts
// more than a valid config, the host never more than a bounded answer.
package bootproto

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/airlock-dev/airlock/sandbox"
)

// The boot exchange on the agent channel, before the agent protocol (yamux)
// starts:
//
//	guest -> host  'R'                      the init is ready for its config
//	host  -> guest uint32 BE length | JSON  Config
//	guest -> host  'S'                      the sandbox is set up: yamux follows
//	guest -> host  'E' uint32 BE | message  setup failed (the VM powers off)
//
// A VM restored from a template is waiting for its config (the template was
// snapshotted after its 'R'), so the host sends the config at once.
const (
	Ready = 'R'
	OK    = 'S'
	Err   = 'E'
	// MaxConfig bounds the config (injected files included).
	MaxConfig = 8 << 20
	// maxErr bounds the guest's error message.
	maxErr = 4096
	// MaxShares is the number of 9p devices every VM has (unused ones share
	// an empty directory): a fixed layout, so that any sandbox can be
	// restored from any template.
	MaxShares = 16
)

// Config is what the host tells the guest's init: the filesystem to
// build, the clock, fresh entropy and the limits the guest kernel enforces.
type Config struct {
	TimeNanos int64  `json:"time_ns"`  // host's wall clock
	Seed      []byte `json:"seed"`     // mixed into the guest's RNG (templates share theirs)
	Hostname  string `json:"hostname"` // the sandbox ID
	// Root, when set, is the share the root filesystem comes from (an
	// image directory): mounted read-only with a writable layer in the
	// guest (mount points and the image's own writes stay in the VM).
	// Nil: the root is an empty tmpfs holding mount points and Links.
	Root *Mount `json:"root,omitempty"`
	// RootTags are the shares of the root's layers, lowest first (an OCI
	// image's): overlaid in that order under the writable layer. Empty:
	// Root.Tag is the one layer.
	RootTags []string `json:"root_tags,omitempty"`
	// RootWritable leaves an image's root writable (its writable layer,
	// as image sandboxes have on every backend); else it is read-only
	// once built (a policy's rootfs).
	RootWritable bool    `json:"root_rw,omitempty"`
	Mounts       []Mount `json:"mounts"`          // in order (parents first)
	Links        []Link  `json:"links,omitempty"` // top-level symlinks (/bin -> usr/bin)
	Files        []File  `json:"files,omitempty"`
	Deny         []Deny  `json:"deny,omitempty"`
	NoFile       uint64  `json:"nofile,omitempty"`  // RLIMIT_NOFILE of every process (0: kernel default)
	Pids         int64   `json:"pids,omitempty"`    // pids.max of the sandbox's processes (0: none)
	MemoryMax    int64   `json:"mem_max,omitempty"` // memory.max of the sandbox's processes (0: none)
	Loopback     bool    `json:"loopback"`          // bring lo up (the egress listener needs it)
	Probe        bool    `json:"probe,omitempty"`   // KVM probe: answer 'S' and power off
}

// Mount is one 9p share or tmpfs mounted inside; the list is in mount
// order (a mount point's parents first).
type Mount struct {
	Type     string `json:"type"`          // "9p" or "tmpfs"
	Tag      string `json:"tag,omitempty"` // 9p mount tag (share0 ...)
	Path     string `json:"path"`          // where inside
	ReadOnly bool   `json:"ro"`
	// tmpfs: size in bytes (0: the kernel's default), mode and owner.
	Size int64  `json:"size,omitempty"`
	Mode uint32 `json:"mode,omitempty"`
	UID  int    `json:"uid,omitempty"`
	GID  int    `json:"gid,omitempty"`
	// Overlay: the share is read-only on the host and the guest puts a
	// writable layer (tmpfs of OverlaySize bytes) over it; Sync writes the
	// changes back through the guard.
	Overlay     bool  `json:"overlay,omitempty"`
	OverlaySize int64 `json:"overlay_size,omitempty"`
	// Cache: 9p cache mode ("loose" for read-only system dirs, "" for
	// shares the host may change).
	Cache string `json:"cache,omitempty"`
}

type Link struct {
	Path   string `json:"path"`
	Target string `json:"target"`
}

type File struct {
	Path string `json:"path"`
	Data []byte `json:"data"`
	Mode uint32 `json:"mode"`
}

type Deny struct {
	Path string `json:"path"`
	Dir  bool   `json:"dir"`
}

// Validate checks a config on either side: paths absolute and clean,
// tags ours, sizes bounded.
func (c *Config) Validate() error {
	bad := func(what, p string) error {
		return fmt.Errorf("boot config: %s %q: not an absolute clean path: %w", what, p, sandbox.ErrInvalid)
	}
	ok := func(p string) bool {
		return strings.HasPrefix(p, "/") && path.Clean(p) == p && !strings.ContainsRune(p, 0) && len(p) < 4096
	}
	for _, m := range c.Mounts {
		if !ok(m.Path) || m.Path == "/" {
			return bad("mount", m.Path)
		}
		switch {
		case m.Type == "tmpfs":
		case m.Type == "9p" && strings.HasPrefix(m.Tag, "share") && len(m.Tag) <= 16:
		default:
			return fmt.Errorf("boot config: mount %s: type %q tag %q: %w", m.Path, m.Type, m.Tag, sandbox.ErrInvalid)
		}
	}
	if r := c.Root; r != nil && (r.Type != "9p" || r.Path != "/" || !strings.HasPrefix(r.Tag, "share") || len(r.Tag) > 16) {
		return fmt.Errorf("boot config: root share %+v: %w", *r, sandbox.ErrInvalid)
	}
	if len(c.RootTags) > MaxShares || (len(c.RootTags) > 0 && c.Root == nil) {
		return fmt.Errorf("boot config: %d root layers: %w", len(c.RootTags), sandbox.ErrInvalid)
	}
	for _, t := range c.RootTags {
		if !strings.HasPrefix(t, "share") || len(t) > 16 {
			return fmt.Errorf("boot config: root layer tag %q: %w", t, sandbox.ErrInvalid)
		}
	}
	for _, l := range c.Links {
		if !ok(l.Path) || strings.Count(l.Path, "/") != 1 || strings.ContainsRune(l.Target, 0) {
			return bad("link", l.Path)
		}
	}
	for _, f := range c.Files {
		if !ok(f.Path) || f.Path == "/" {
			return bad("file", f.Path)
		}
	}
	for _, d := range c.Deny {
		if !ok(d.Path) || d.Path == "/" {
			return bad("deny", d.Path)
		}
	}
	if len(c.Hostname) > 64 {
		return fmt.Errorf("boot config: hostname too long: %w", sandbox.ErrInvalid)
	}
	return nil
}

// WriteConfig sends c (host side).
func WriteConfig(w io.Writer, c *Config) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if len(b) > MaxConfig {
		return fmt.Errorf("boot config of %d bytes exceeds %d (injected files too large?): %w", len(b), MaxConfig, sandbox.ErrInvalid)
	}
	hdr := binary.BigEndian.AppendUint32(nil, uint32(len(b)))
	_, err = w.Write(append(hdr, b...))
	return err
}

// ReadConfig reads and validates a config (guest side).
func ReadConfig(r io.Reader) (*Config, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 || n > MaxConfig {
		return nil, fmt.Errorf("boot config length %d out of range", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("boot config: %w", err)
	}
	return &c, c.Validate()
}

// ReadAnswer reads the guest's 'S' or its error (host side). Nothing the
// guest says is trusted: the message is bounded and cleaned.
func ReadAnswer(r io.Reader) error {
	var b [1]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return fmt.Errorf("guest setup: no answer: %w", err)
	}
	switch b[0] {
	case OK:
		return nil
	case Err:
		var hdr [4]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return fmt.Errorf("guest setup failed (no message): %w", err)
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > maxErr {
			return errors.New("guest setup failed (message too long)")
		}
		msg := make([]byte, n)
		if _, err := io.ReadFull(r, msg); err != nil {
			return fmt.Errorf("guest setup failed (short message): %w", err)
		}
		return fmt.Errorf("guest setup failed: %s", CleanMessage(string(msg)))
	}
	return fmt.Errorf("guest setup: unexpected answer byte %#x", b[0])
}

// CleanMessage makes an untrusted message printable: control characters
// replaced, at most 512 characters.
func CleanMessage(m string) string {
	s := []rune(m)
	for i, r := range s {
		if r < 0x20 || r == 0x7f {
			s[i] = '?'
		}
	}
	if len(s) > 512 {
		s = s[:512]
	}
	return string(s)
}

// WriteAnswer sends the guest's answer: 'S' for a nil err, else 'E' and
// the message (guest side).
func WriteAnswer(w io.Writer, err error) error {
	if err == nil {
		_, werr := w.Write([]byte{OK})
		return werr
	}
	msg := err.Error()
	if len(msg) > maxErr {
		msg = msg[:maxErr]
	}
	b := binary.BigEndian.AppendUint32([]byte{Err}, uint32(len(msg)))
	_, werr := w.Write(append(b, msg...))
	return werr
}
