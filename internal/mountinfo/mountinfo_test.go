package mountinfo

import (
	"strings"
	"testing"
)

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/plain`:             "/plain",
		`/with\040space`:     "/with space",
		`/tab\011and\012nl`:  "/tab\tand\nnl",
		`/back\134slash`:     `/back\slash`,
		`/not\0a`:            `/not\0a`,
		`/high\777`:          `/high\777`,
		`/end\04`:            `/end\04`,
		`/two\040\040spaces`: "/two  spaces",
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParse(t *testing.T) {
	const in = `22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro
35 22 0:30 / /sys/fs/cgroup/memory ro,nosuid,nodev,noexec,relatime shared:12 master:3 - cgroup cgroup rw,memory
36 22 0:31 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate
40 22 8:1 /data/with\040space /mnt/a\040b rw - xfs /dev/my\040disk rw
41 22 0:50 / /proc rw - proc proc
`
	ms, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 5 {
		t.Fatalf("got %d mounts, want 5", len(ms))
	}
	mem := ms[1]
	if mem.ID != 35 || mem.Parent != 22 || mem.Point != "/sys/fs/cgroup/memory" || mem.FSType != "cgroup" ||
		!mem.HasSuperOption("memory") || mem.HasSuperOption("mem") || !mem.ReadOnly() {
		t.Errorf("cgroup v1 line (optional fields shared: and master:) parsed as %+v", mem)
	}
	if ms[2].ReadOnly() || ms[2].FSType != "cgroup2" {
		t.Errorf("cgroup2 line parsed as %+v", ms[2])
	}
	if a := ms[3]; a.Root != "/data/with space" || a.Point != "/mnt/a b" || a.Source != "/dev/my disk" {
		t.Errorf("escaped fields parsed as %+v", a)
	}
	if ms[4].Super != "" || ms[4].FSType != "proc" {
		t.Errorf("line without super options parsed as %+v", ms[4])
	}
	if !ms[3].Under("/mnt") || ms[3].Under("/mn") || !ms[3].Under("/") || !ms[3].Under("/mnt/a b") {
		t.Error("Under is wrong")
	}
	for _, bad := range []string{"22 1 0:21 / / rw", "x 1 0:21 / / rw - ext4 /dev/sda1 rw", "22 1 0:21 / - ext4 a b"} {
		if _, err := ParseLine(bad); err == nil {
			t.Errorf("ParseLine(%q): no error", bad)
		}
	}
}
