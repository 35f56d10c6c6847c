// Package idmap leases host uid/gid ranges to sandboxes, so that a sandbox
// whose processes are root (or anyone) inside maps onto unprivileged host
// ids that no real user, file or other sandbox has: a host file readable
// only by root stays unreadable whatever a deny list forgot.
//
// A lease is an exclusive flock on a per-slot lock file: it lasts exactly
// as long as the process that took it (the kernel drops the lock however
// that process ends) and is never taken from a live holder. It must never
// hand out a range that overlaps /etc/passwd, /etc/group or another
// user's /etc/subuid or /etc/subgid entries.
package idmap

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Size is the width of one range: ids 0..65535 inside a sandbox.
const Size = 65536

// Default range airlock reserves when no user's subordinate ids are
// configured: 1024 slots of 65536 from 0x6C000000 (1811939328) to
// 0x6FFFFFFF. It lies above login.defs' UID_MAX (60000) and SUB_UID_MAX
// (600100000), so neither useradd nor the subordinate-id allocator of
// shadow-utils ever gives these ids to anyone, and below 2^31, where
// tools that treat ids as signed misbehave. Pick checks the host's
// passwd, group, subuid and subgid files and refuses to use it when
// anything there overlaps.
const (
	DefaultBase  = 0x6C000000
	DefaultSlots = 1024
)

// Range is a contiguous block of host ids, Count wide.
type Range struct {
	UID, GID int // first host uid and gid
	Count    int // width of both
}

// Source is where ranges are leased from. Create with Default or
// ForUser; safe for concurrent use.
type Source struct {
	// What describes the source for doctor and errors.
	What string
	// slots: uid and gid bases of each Size-wide slot.
	uids, gids []int
	lockDir    string

	mu   sync.Mutex
	next int // where the next search starts (spreads reuse)
}

// Lease is one leased range. Release it when the sandbox is gone.
type Lease struct {
	Range
	f    *os.File
	once sync.Once
}

// Release frees the range. Idempotent.
func (l *Lease) Release() {
	if l == nil {
		return
	}
	l.once.Do(func() { l.f.Close() })
}

// Default returns airlock's reserved range, leased through lock files in
// lockDir (shared by every airlock process on the host).
func Default(lockDir string) (*Source, error) {
	s := &Source{What: fmt.Sprintf("airlock's reserved range %d-%d (%d slots of %d)", DefaultBase, DefaultBase+DefaultSlots*Size-1, DefaultSlots, Size), lockDir: lockDir}
	for i := 0; i < DefaultSlots; i++ {
		s.uids = append(s.uids, DefaultBase+i*Size)
		s.gids = append(s.gids, DefaultBase+i*Size)
	}
	if err := s.checkHost(); err != nil {
		return nil, err
	}
	return s, nil
}

// ForUser returns the ranges of user's /etc/subuid and /etc/subgid
// entries (each cut into Size-wide slots, the n-th uid slot paired with
// the n-th gid slot).
func ForUser(user, lockDir string) (*Source, error) {
	return forUser(user, lockDir, "/etc/subuid", "/etc/subgid")
}

func forUser(user, lockDir, subuid, subgid string) (*Source, error) {
	us, err := subordinate(subuid, user)
	if err != nil {
		return nil, err
	}
	gs, err := subordinate(subgid, user)
	if err != nil {
		return nil, err
	}
	s := &Source{lockDir: lockDir}
	for _, r := range us {
		for b := r[0]; b+Size <= r[0]+r[1]; b += Size {
			s.uids = append(s.uids, b)
		}
	}
	for _, r := range gs {
		for b := r[0]; b+Size <= r[0]+r[1]; b += Size {
			s.gids = append(s.gids, b)
		}
	}
	n := min(len(s.uids), len(s.gids))
	if n == 0 {
		return nil, fmt.Errorf("host ids of user %q: %s: %w", user, missingRange(user, subuid, us, subgid, gs), errUnavailable)
	}
	s.uids, s.gids = s.uids[:n], s.gids[:n]
	s.What = fmt.Sprintf("%s/%s entries of user %q (%d slots of %d)", subuid, subgid, user, n, Size)
	return s, nil
}

// Slots is how many ranges the source has.
func (s *Source) Slots() int { return len(s.uids) }

// Lease takes a free range: the first slot (from a moving start) whose
// lock file no live process holds.
func (s *Source) Lease() (*Lease, error) {
	if err := os.MkdirAll(s.lockDir, 0o700); err != nil {
		return nil, fmt.Errorf("lease host ids: %w: %w", err, errUnavailable)
	}
	s.mu.Lock()
	start := s.next
	s.mu.Unlock()
	n := len(s.uids)
	for i := 0; i < n; i++ {
		k := (start + i) % n
		f, err := tryLock(filepath.Join(s.lockDir, fmt.Sprintf("%d-%d.lock", s.uids[k], s.gids[k])))
		if err != nil {
			return nil, fmt.Errorf("lease host ids: %w: %w", err, errUnavailable)
		}
		if f == nil {
			continue // held by a live sandbox
		}
		s.mu.Lock()
		s.next = k + 1
		s.mu.Unlock()
		return &Lease{Range: Range{UID: s.uids[k], GID: s.gids[k], Count: Size}, f: f}, nil
	}
	return nil, fmt.Errorf("lease host ids: all %d ranges of %s are in use: %w", n, s.What, errLimit)
}

// checkHost refuses a source that overlaps any id the host gives out:
// /etc/passwd, /etc/group, /etc/subuid and /etc/subgid.
func (s *Source) checkHost() error {
	return s.checkFiles("/etc/passwd", "/etc/group", "/etc/subuid", "/etc/subgid")
}

func (s *Source) checkFiles(passwd, group, subuid, subgid string) error {
	lo, hi := s.uids[0], s.uids[len(s.uids)-1]+Size-1
	in := func(id int) bool { return id >= lo && id <= hi }
	for _, f := range []string{passwd, group} {
		ids, err := idsOf(f)
		if err != nil {
			return err
		}
		for name, id := range ids {
			if in(id) {
				return fmt.Errorf("host ids: %s: %q has id %d inside %s: %w", f, name, id, s.What, errUnavailable)
			}
		}
	}
	for _, f := range []string{subuid, subgid} {
		all, err := allSubordinate(f)
		if err != nil {
			return err
		}
		for _, r := range all {
			if r.start <= hi && r.start+r.count-1 >= lo {
				return fmt.Errorf("host ids: %s: %q's range %d+%d overlaps %s: %w", f, r.user, r.start, r.count, s.What, errUnavailable)
			}
		}
	}
	return nil
}

// idsOf reads name -> id of a passwd- or group-format file (missing: none).
func idsOf(file string) (map[string]int, error) {
	out := map[string]int{}
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("host ids: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Split(sc.Text(), ":")
		if len(fs) < 3 {
			continue
		}
		if id, err := strconv.Atoi(fs[2]); err == nil {
			out[fs[0]] = id
		}
	}
	return out, sc.Err()
}

type subEntry struct {
	user         string
	start, count int
}

func allSubordinate(file string) ([]subEntry, error) {
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("host ids: %w", err)
	}
	defer f.Close()
	var out []subEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Split(line, ":")
		if len(fs) != 3 {
			continue
		}
		a, err1 := strconv.Atoi(fs[1])
		b, err2 := strconv.Atoi(fs[2])
		if err1 != nil || err2 != nil || a < 0 || b <= 0 {
			continue
		}
		out = append(out, subEntry{fs[0], a, b})
	}
	return out, sc.Err()
}

// subordinate returns user's [start, count] entries of file.
func subordinate(file, user string) ([][2]int, error) {
	all, err := allSubordinate(file)
	if err != nil {
		return nil, err
	}
	var out [][2]int
	for _, e := range all {
		if e.user == user {
			out = append(out, [2]int{e.start, e.count})
		}
	}
	return out, nil
}

// missingRange says which of the subordinate files lacks a Size-wide
// range for user (none at all, or only narrower ones) and how to add one.
func missingRange(user, subuid string, us [][2]int, subgid string, gs [][2]int) string {
	var why []string
	for _, f := range []struct {
		file string
		rs   [][2]int
	}{{subuid, us}, {subgid, gs}} {
		widest := 0
		for _, r := range f.rs {
			widest = max(widest, r[1])
		}
		switch {
		case len(f.rs) == 0:
			why = append(why, fmt.Sprintf("%s has no entry for %s", f.file, user))
		case widest < Size:
			why = append(why, fmt.Sprintf("%s gives %s at most %d ids in one range, %d are needed", f.file, user, widest, Size))
		}
	}
	return strings.Join(why, "; ") + fmt.Sprintf(" (as root: usermod --add-subuids FIRST-LAST --add-subgids FIRST-LAST %s, with a free range of %d ids such as 100000-165535 when no one has it)", user, Size)
}
