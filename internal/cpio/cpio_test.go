package cpio

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// TestArchiveLayout writes an archive and reads it back by the newc rules:
// magic, 13 hex fields, name with NUL, header+name and data each padded to
// four bytes, the trailer last.
func TestArchiveLayout(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.Dir("lib", 0o755))
	must(w.File("lib/a", 0o644, strings.NewReader("hello"), 5))
	must(w.File("init", 0o755, strings.NewReader("123456"), 6))
	must(w.Close())
	b := buf.Bytes()
	type ent struct {
		name string
		mode uint64
		data string
	}
	var got []ent
	for off := 0; ; {
		if string(b[off:off+6]) != "070701" {
			t.Fatalf("offset %d: magic %q", off, b[off:off+6])
		}
		field := func(i int) uint64 {
			v, err := strconv.ParseUint(string(b[off+6+8*i:off+6+8*i+8]), 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		mode, size, nsize := field(1), field(6), field(11)
		name := string(b[off+110 : off+110+int(nsize)-1])
		if b[off+110+int(nsize)-1] != 0 {
			t.Fatalf("%s: name not NUL-terminated", name)
		}
		off += (110 + int(nsize) + 3) &^ 3
		data := string(b[off : off+int(size)])
		off += (int(size) + 3) &^ 3
		got = append(got, ent{name, mode, data})
		if name == "TRAILER!!!" {
			if off != len(b) {
				t.Fatalf("%d bytes after the trailer", len(b)-off)
			}
			break
		}
	}
	want := []ent{{"lib", 0o40755, ""}, {"lib/a", 0o100644, "hello"}, {"init", 0o100755, "123456"}, {"TRAILER!!!", 0, ""}}
	if len(got) != len(want) {
		t.Fatalf("entries %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("entry %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if err := NewWriter(&buf).File("short", 0o644, strings.NewReader("ab"), 3); err == nil {
		t.Fatal("a short file was accepted")
	}
}
