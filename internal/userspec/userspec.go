// Package userspec resolves a user as images and exec requests name it
// ("root", "1000", "app:staff", "1000:1000") against a root filesystem's
// /etc/passwd and /etc/group, the one parser for the host (reading an
// image's layers) and the guest agent (reading its own root). It only
// parses: it never opens a file itself and trusts nothing it reads
// (entries are bounded, malformed lines skipped).
package userspec

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/airlock-dev/airlock/errdefs"
)

// User is a resolved user.
type User struct {
	UID, GID int
	Name     string // "" when given by number and not in passwd
	Home     string // from passwd; "" when unknown
	Shell    string
}

// maxName bounds a user or group name Names returns.
const maxName = 256

// maxID is the largest id a user namespace can map.
const maxID = 1<<31 - 2

// Resolve resolves spec ("" means root) with the passwd and group
// databases (either may be nil: numeric specs still resolve). A name not
// in the databases is ErrNotFound; a malformed spec ErrInvalid.
func Resolve(spec string, passwd, group io.Reader) (User, error) {
	if spec == "" {
		spec = "0"
	}
	if len(spec) > 256 || strings.ContainsAny(spec, "\x00\n") {
		return User{}, fmt.Errorf("user %q: malformed: %w", spec, errdefs.ErrInvalid)
	}
	us, gs, hasGroup := strings.Cut(spec, ":")
	if us == "" || hasGroup && gs == "" {
		return User{}, fmt.Errorf("user %q: want USER[:GROUP] (names or numbers): %w", spec, errdefs.ErrInvalid)
	}
	users := parse(passwd, 7)
	var u User
	if n, ok := number(us); ok {
		u = User{UID: n, GID: n}
		for _, f := range users {
			if id, ok := number(f[2]); ok && id == n {
				u = entry(f)
				break
			}
		}
		if !hasGroup && u.Name == "" {
			u.GID = n // Docker: a bare uid not in passwd runs with gid = uid
		}
	} else {
		found := false
		for _, f := range users {
			if f[0] == us {
				u, found = entry(f), true
				break
			}
		}
		if !found {
			return User{}, fmt.Errorf("user %q: no such user in the image's /etc/passwd: %w", us, errdefs.ErrNotFound)
		}
	}
	if hasGroup {
		if n, ok := number(gs); ok {
			u.GID = n
		} else {
			found := false
			for _, f := range parse(group, 4) {
				if f[0] == gs {
					if id, ok := number(f[2]); ok {
						u.GID, found = id, true
						break
					}
				}
			}
			if !found {
				return User{}, fmt.Errorf("group %q: no such group in the image's /etc/group: %w", gs, errdefs.ErrNotFound)
			}
		}
	}
	if u.UID < 0 || u.GID < 0 || u.UID > maxID || u.GID > maxID {
		return User{}, fmt.Errorf("user %q: id out of range: %w", spec, errdefs.ErrInvalid)
	}
	return u, nil
}

func entry(f []string) User {
	uid, _ := number(f[2])
	gid, _ := number(f[3])
	return User{UID: uid, GID: gid, Name: f[0], Home: f[5], Shell: f[6]}
}

// number parses a decimal id (no sign, at most 10 digits).
func number(s string) (int, bool) {
	if s == "" || len(s) > 10 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n <= maxID
}

// parse reads colon-separated lines with at least n fields (at most 64
// KiB a line, 1 MiB in all); others are skipped.
func parse(r io.Reader, n int) [][]string {
	if r == nil {
		return nil
	}
	var out [][]string
	sc := bufio.NewScanner(io.LimitReader(r, 1<<20))
	sc.Buffer(make([]byte, 4096), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) < n {
			continue
		}
		if n == 4 {
			if _, ok := number(f[2]); !ok {
				continue
			}
			out = append(out, f)
			continue
		}
		if _, ok := number(f[2]); !ok {
			continue
		}
		if _, ok := number(f[3]); !ok {
			continue
		}
		out = append(out, f)
	}
	return out
}

// Names maps ids to names with the passwd and group databases (either may
// be nil): what `ls -l` shows as a file's owner and group. The first
// entry of an id wins; names longer than maxName are left out.
func Names(passwd, group io.Reader) (users, groups map[int]string) {
	users, groups = map[int]string{}, map[int]string{}
	for _, f := range parse(passwd, 7) {
		if id, ok := number(f[2]); ok && users[id] == "" && f[0] != "" && len(f[0]) <= maxName {
			users[id] = f[0]
		}
	}
	for _, f := range parse(group, 4) {
		if id, ok := number(f[2]); ok && groups[id] == "" && f[0] != "" && len(f[0]) <= maxName {
			groups[id] = f[0]
		}
	}
	return users, groups
}
