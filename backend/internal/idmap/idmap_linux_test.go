package idmap

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/errdefs"
)

func small(t *testing.T, slots int) *Source {
	s := &Source{What: "test", lockDir: t.TempDir()}
	for i := 0; i < slots; i++ {
		s.uids = append(s.uids, DefaultBase+i*Size)
		s.gids = append(s.gids, DefaultBase+i*Size)
	}
	return s
}

func TestLeasesAreExclusiveUntilReleased(t *testing.T) {
	s := small(t, 3)
	var ls []*Lease
	seen := map[int]bool{}
	for i := 0; i < 3; i++ {
		l, err := s.Lease()
		if err != nil {
			t.Fatal(err)
		}
		if seen[l.UID] || l.Count != Size || l.UID != l.GID {
			t.Fatalf("lease %d: %+v (seen %v)", i, l.Range, seen)
		}
		seen[l.UID] = true
		ls = append(ls, l)
	}
	if _, err := s.Lease(); !errors.Is(err, errdefs.ErrLimit) {
		t.Fatalf("fourth lease of three: %v, want ErrLimit", err)
	}
	// Another Source on the same lock directory (another airlock
	// process) sees the same leases.
	other := small(t, 3)
	other.lockDir = s.lockDir
	if _, err := other.Lease(); !errors.Is(err, errdefs.ErrLimit) {
		t.Fatalf("lease through a second source: %v, want ErrLimit", err)
	}
	ls[1].Release()
	ls[1].Release() // idempotent
	l, err := other.Lease()
	if err != nil || l.UID != ls[1].UID {
		t.Fatalf("after release: %+v %v, want %d", l, err, ls[1].UID)
	}
}

// TestLeaseDiesWithItsHolder: a process holding a lease is SIGKILLed;
// its range is free at once, while a live holder's never is.
func TestLeaseDiesWithItsHolder(t *testing.T) {
	s := small(t, 1)
	lock := filepath.Join(s.lockDir, lockName(s, 0))
	// The shell execs sleep, which holds the lock: one process to kill.
	cmd := exec.Command("sh", "-c", "exec 9>"+lock+"; flock -x 9; exec sleep 60") // flock(1): util-linux, essential on Debian
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the child holds it.
	for i := 0; ; i++ {
		if _, err := os.Stat(lock); err == nil {
			if l, err := s.Lease(); err == nil {
				l.Release()
			} else if errors.Is(err, errdefs.ErrLimit) {
				break
			}
		}
		if i > 500 {
			t.Fatal("child never took the lock")
		}
		exec.Command("sleep", "0.01").Run()
	}
	cmd.Process.Kill()
	cmd.Wait()
	l, err := s.Lease()
	if err != nil {
		t.Fatalf("lease after its holder was killed: %v", err)
	}
	l.Release()
}

func lockName(s *Source, k int) string {
	return strconv.Itoa(s.uids[k]) + "-" + strconv.Itoa(s.gids[k]) + ".lock"
}

func TestHostOverlapRefused(t *testing.T) {
	dir := t.TempDir()
	w := func(name, data string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(data), 0o644)
		return p
	}
	s := small(t, 4)
	clean := w("passwd", "root:x:0:0::/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n")
	group := w("group", "root:x:0:\n")
	sub := w("subuid", "alice:100000:65536\n")
	if err := s.checkFiles(clean, group, sub, sub); err != nil {
		t.Fatalf("clean host: %v", err)
	}
	bad := w("passwd2", "svc:x:1811939400:1::/:/bin/false\n")
	if err := s.checkFiles(bad, group, sub, sub); !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "svc") {
		t.Fatalf("user inside the range: %v", err)
	}
	badSub := w("subuid2", "bob:1811000000:10000000\n")
	if err := s.checkFiles(clean, group, badSub, sub); !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "bob") {
		t.Fatalf("subuid overlapping: %v", err)
	}
	// The real host must not overlap the default range.
	if _, err := Default(t.TempDir()); err != nil {
		t.Fatalf("default range on this host: %v", err)
	}
}

func TestForUser(t *testing.T) {
	dir := t.TempDir()
	su := filepath.Join(dir, "subuid")
	sg := filepath.Join(dir, "subgid")
	os.WriteFile(su, []byte("# c\nairlock:200000:196608\nother:100000:65536\nairlock:900000:1000\n"), 0o644)
	os.WriteFile(sg, []byte("airlock:300000:131072\n"), 0o644)
	s, err := forUser("airlock", t.TempDir(), su, sg)
	if err != nil {
		t.Fatal(err)
	}
	if s.Slots() != 2 || s.uids[1] != 200000+Size || s.gids[1] != 300000+Size {
		t.Fatalf("slots %d uids %v gids %v", s.Slots(), s.uids, s.gids)
	}
	if _, err := forUser("nobody", t.TempDir(), su, sg); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("user without entries: %v", err)
	}
}
