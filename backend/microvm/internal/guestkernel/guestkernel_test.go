package guestkernel

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeBzImage is a setup header with a payload of the given bytes.
func fakeBzImage(payload []byte) []byte {
	setup := 1
	b := make([]byte, (setup+1)*512)
	b[offSetupSects] = byte(setup)
	copy(b[offBootMagic:], "HdrS")
	binary.LittleEndian.PutUint16(b[offVersion:], 0x20f)
	binary.LittleEndian.PutUint32(b[offPayloadOffset:], 16)
	binary.LittleEndian.PutUint32(b[offPayloadLength:], uint32(len(payload)))
	b = append(b, make([]byte, 16)...)
	return append(b, payload...)
}

func TestPayload(t *testing.T) {
	p, comp, err := Payload(fakeBzImage([]byte{0xfd, '7', 'z', 'X', 'Z', 0, 1, 2}))
	if err != nil || comp != "xz" || len(p) != 8 {
		t.Fatalf("%v %q %d", err, comp, len(p))
	}
	for name, bz := range map[string][]byte{
		"short":    make([]byte, 100),
		"no magic": make([]byte, 4096),
		"past end": func() []byte {
			b := fakeBzImage([]byte{0x1f, 0x8b})
			binary.LittleEndian.PutUint32(b[offPayloadLength:], 1<<30)
			return b
		}(),
		"old proto": func() []byte {
			b := fakeBzImage([]byte{0x1f, 0x8b})
			binary.LittleEndian.PutUint16(b[offVersion:], 0x200)
			return b
		}(),
		"unknown": fakeBzImage([]byte("hello")),
	} {
		if _, _, err := Payload(bz); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestLoadOrder(t *testing.T) {
	mods := map[string]Module{
		"a": {Name: "a", Depends: []string{"b", "c"}}, "b": {Name: "b", Depends: []string{"c"}}, "c": {Name: "c"},
		"x": {Name: "x", Depends: []string{"y"}}, "y": {Name: "y", Depends: []string{"x"}},
	}
	o, err := LoadOrder(mods, []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range o {
		names = append(names, m.Name)
	}
	if strings.Join(names, ",") != "c,b,a" {
		t.Fatalf("order %v", names)
	}
	if _, err := LoadOrder(mods, []string{"x"}); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("cycle: %v", err)
	}
	if _, err := LoadOrder(mods, []string{"nope"}); err == nil {
		t.Fatal("missing module accepted")
	}
	if ModName("kernel/drivers/char/hw_random/virtio-rng.ko") != "virtio_rng" {
		t.Fatal("dashes not canonical")
	}
}

// TestPreparedKernel checks the directory `make guest-kernel` wrote: an
// x86-64 vmlinux with a PVH note, modules whose dependencies come first.
func TestPreparedKernel(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "..", "var", "microvm", "kernel")
	if d := os.Getenv("AIRLOCK_MICROVM_DIR"); d != "" {
		dir = filepath.Join(d, "kernel")
	}
	if _, err := os.Stat(filepath.Join(dir, "kernel.json")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no guest kernel in CI: %v (make deps runs make guest-kernel)", err)
		}
		t.Skip("no guest kernel (make guest-kernel)")
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "modules"))
	if len(ents) == 0 {
		t.Fatal("no modules")
	}
	order, err := os.ReadFile(filepath.Join(dir, "kernel.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range Wanted {
		if !strings.Contains(string(order), `"`+name+`.ko"`) {
			t.Errorf("module %s not prepared", name)
		}
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, "modules", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ModinfoDepends(b); err != nil {
			t.Errorf("%s: %v", e.Name(), err)
		}
	}
}

// FuzzPayload: any file given as a bzImage is refused or yields a payload
// inside it, never a panic.
func FuzzPayload(f *testing.F) {
	f.Add(fakeBzImage([]byte{0x28, 0xb5, 0x2f, 0xfd, 9}))
	f.Add(make([]byte, 1024))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, _, err := Payload(b)
		if err == nil && len(p) > len(b) {
			t.Fatal("payload larger than the file")
		}
	})
}
