package bootproto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/sandbox"
)

func TestConfigRoundTrip(t *testing.T) {
	c := &Config{TimeNanos: 1, Seed: []byte{1, 2}, Hostname: "sb", Mounts: []Mount{{Type: "9p", Tag: "share0", Path: "/usr", ReadOnly: true}, {Type: "tmpfs", Path: "/tmp", Mode: 0o1777}},
		Links: []Link{{Path: "/bin", Target: "usr/bin"}}, Files: []File{{Path: "/etc/x", Data: []byte("x")}}, Deny: []Deny{{Path: "/etc/shadow"}}}
	var b bytes.Buffer
	if err := WriteConfig(&b, c); err != nil {
		t.Fatal(err)
	}
	got, err := ReadConfig(&b)
	if err != nil || got.Hostname != "sb" || len(got.Mounts) != 2 || got.Mounts[0].Tag != "share0" {
		t.Fatalf("%+v %v", got, err)
	}
}

func TestConfigRefusals(t *testing.T) {
	for name, c := range map[string]Config{
		"relative mount":  {Mounts: []Mount{{Type: "tmpfs", Path: "tmp"}}},
		"root mount":      {Mounts: []Mount{{Type: "tmpfs", Path: "/"}}},
		"unclean":         {Mounts: []Mount{{Type: "tmpfs", Path: "/a/../b"}}},
		"foreign tag":     {Mounts: []Mount{{Type: "9p", Tag: "/dev/sda", Path: "/x"}}},
		"unknown type":    {Mounts: []Mount{{Type: "ext4", Path: "/x"}}},
		"deep link":       {Links: []Link{{Path: "/a/b", Target: "x"}}},
		"file at root":    {Files: []File{{Path: "/"}}},
		"relative deny":   {Deny: []Deny{{Path: "etc"}}},
		"long host name":  {Hostname: strings.Repeat("h", 65)},
		"NUL in the path": {Mounts: []Mount{{Type: "tmpfs", Path: "/a\x00b"}}},
	} {
		if err := c.Validate(); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	var b bytes.Buffer
	b.Write([]byte{0, 0, 0, 0})
	if _, err := ReadConfig(&b); err == nil {
		t.Error("zero length accepted")
	}
	b.Reset()
	b.Write(binary.BigEndian.AppendUint32(nil, MaxConfig+1))
	if _, err := ReadConfig(&b); err == nil {
		t.Error("oversized length accepted")
	}
}

func TestAnswer(t *testing.T) {
	var b bytes.Buffer
	WriteAnswer(&b, nil)
	if err := ReadAnswer(&b); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	WriteAnswer(&b, errors.New("mount /x: no\x1b[31m"))
	err := ReadAnswer(&b)
	if err == nil || !strings.Contains(err.Error(), "mount /x: no?[31m") {
		t.Fatalf("%v", err)
	}
	b.Reset()
	b.Write(append([]byte{Err}, binary.BigEndian.AppendUint32(nil, 1<<30)...))
	if err := ReadAnswer(&b); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Fatalf("oversized message: %v", err)
	}
}

// FuzzReadAnswer: whatever the guest sends (it is untrusted), the host's
// reader returns without panicking or allocating more than the bound.
func FuzzReadAnswer(f *testing.F) {
	f.Add([]byte{OK})
	f.Add(append([]byte{Err, 0, 0, 0, 3}, "bad"...))
	f.Add([]byte{Err, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		err := ReadAnswer(bytes.NewReader(b))
		if err != nil && len(err.Error()) > 2*maxErr {
			t.Fatalf("error of %d bytes", len(err.Error()))
		}
	})
}

// FuzzReadConfig: the guest's reader refuses or accepts any input without
// panicking, and what it accepts is valid.
func FuzzReadConfig(f *testing.F) {
	var b bytes.Buffer
	WriteConfig(&b, &Config{Mounts: []Mount{{Type: "9p", Tag: "share1", Path: "/w"}}})
	f.Add(b.Bytes())
	f.Add([]byte{0, 0, 0, 2, '{', '}'})
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := ReadConfig(bytes.NewReader(in))
		if err == nil && c.Validate() != nil {
			t.Fatal("accepted an invalid config")
		}
	})
}
