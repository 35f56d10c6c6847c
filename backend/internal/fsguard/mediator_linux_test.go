package fsguard

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestMediatedMounts(t *testing.T) {
	mi := filepath.Join(t.TempDir(), "mountinfo")
	os.WriteFile(mi, []byte(`20 1 0:30 / / ro,nosuid - tmpfs tmpfs rw
21 20 8:1 /usr /usr ro,nosuid,nodev - ext4 /dev/sda1 rw
22 20 8:1 /home/u/ws /home/u/ws rw,nosuid,nodev - ext4 /dev/sda1 rw
23 22 8:1 /home/u/ws/vendor /home/u/ws/vendor ro,nosuid - ext4 /dev/sda1 rw
24 22 0:40 / /home/u/ws/scratch rw,nosuid - tmpfs tmpfs rw
25 22 8:2 / /home/u/ws/data rw,nosuid - ext4 /dev/sdb1 rw
26 20 8:1 /srv/with\040space /srv/with\040space rw - ext4 /dev/sda1 rw
27 20 0:41 / /tmp rw - tmpfs tmpfs rw
`), 0o644)
	ids, err := mediatedMounts(mi, []string{"/home/u/ws", "/srv/with space"}, []string{"/home/u/ws/scratch"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]bool{22: true, 25: true, 26: true}
	if len(ids) != len(want) {
		t.Fatalf("ids %v, want %v", ids, want)
	}
	for id := range want {
		if !ids[id] {
			t.Errorf("mount %d not mediated (%v)", id, ids)
		}
	}
}

func TestProcSelfFD(t *testing.T) {
	for p, want := range map[string]int32{"/proc/self/fd/3": 3, "/proc/thread-self/fd/12": 12} {
		if n, ok := procSelfFD(p); !ok || n != want {
			t.Errorf("%s: %d %v", p, n, ok)
		}
	}
	for _, p := range []string{"/proc/self/fd/", "/proc/self/fdx/3", "/proc/1/fd/3", "/proc/self/fd/-1", "/proc/self/fd/3/x"} {
		if _, ok := procSelfFD(p); ok {
			t.Errorf("%s accepted", p)
		}
	}
}

// readString reads across a page boundary and stops at the NUL, and a
// string at the end of a mapping does not fail on the next page.
func TestReadString(t *testing.T) {
	page := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 2*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	s := "across/the/page/boundary"
	at := page - 10
	copy(mem[at:], s+"\x00")
	got, err := readString(uint32(unix.Gettid()), uintptr(unsafe.Pointer(&mem[at])))
	if err != nil || got != s {
		t.Fatalf("got %q, %v", got, err)
	}
	// Unmap the second page: a string ending on the first still reads.
	if err := unix.Mprotect(mem[page:], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	copy(mem[page-4:], "abc\x00")
	if got, err := readString(uint32(unix.Gettid()), uintptr(unsafe.Pointer(&mem[page-4]))); err != nil || got != "abc" {
		t.Fatalf("end of mapping: %q, %v", got, err)
	}
	if _, err := readString(uint32(unix.Gettid()), 0); err == nil {
		t.Fatal("NULL read")
	}
}

func TestStripSlashes(t *testing.T) {
	for in, want := range map[string]string{"/a/b/": "/a/b", "/a//": "/a", "/": "/", "/a": "/a"} {
		if got := stripSlashes(in); got != want {
			t.Errorf("%q: %q", in, got)
		}
	}
}
