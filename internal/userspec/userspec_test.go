package userspec

import (
	"errors"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/errdefs"
)

const passwd = "root:x:0:0:root:/root:/bin/sh\n# comment\nbroken line\nuser:x:1000:1000:U:/home/user:/bin/bash\nweird:x:abc:1:w:/w:/bin/sh\n"
const group = "root:x:0:\nstaff:x:50:user\nuser:x:1000:\n"

func TestResolve(t *testing.T) {
	for _, c := range []struct {
		spec     string
		uid, gid int
		home     string
		err      error
	}{
		{"", 0, 0, "/root", nil},
		{"root", 0, 0, "/root", nil},
		{"user", 1000, 1000, "/home/user", nil},
		{"1000", 1000, 1000, "/home/user", nil},
		{"user:staff", 1000, 50, "/home/user", nil},
		{"1000:50", 1000, 50, "/home/user", nil},
		{"4242", 4242, 4242, "", nil},
		{"4242:7", 4242, 7, "", nil},
		{"nobody", 0, 0, "", errdefs.ErrNotFound},
		{"user:nogroup", 0, 0, "", errdefs.ErrNotFound},
		{"weird", 0, 0, "", errdefs.ErrNotFound},
		{":1", 0, 0, "", errdefs.ErrInvalid},
		{"1:", 0, 0, "", errdefs.ErrInvalid},
		{"99999999999", 0, 0, "", errdefs.ErrNotFound},
		{"a\x00b", 0, 0, "", errdefs.ErrInvalid},
	} {
		u, err := Resolve(c.spec, strings.NewReader(passwd), strings.NewReader(group))
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("%q: %v, want %v", c.spec, err, c.err)
			}
			continue
		}
		if err != nil || u.UID != c.uid || u.GID != c.gid || u.Home != c.home {
			t.Errorf("%q: %+v %v, want %d:%d home %q", c.spec, u, err, c.uid, c.gid, c.home)
		}
	}
	if u, err := Resolve("7:8", nil, nil); err != nil || u.UID != 7 || u.GID != 8 {
		t.Errorf("numeric without databases: %+v %v", u, err)
	}
}

func FuzzResolve(f *testing.F) {
	f.Add("user:staff", passwd)
	f.Fuzz(func(t *testing.T, spec, pw string) {
		u, err := Resolve(spec, strings.NewReader(pw), strings.NewReader(pw))
		if err == nil && (u.UID < 0 || u.GID < 0 || u.UID > maxID || u.GID > maxID) {
			t.Fatalf("out of range: %+v", u)
		}
	})
}

func TestNames(t *testing.T) {
	long := strings.Repeat("n", maxName+1)
	users, groups := Names(strings.NewReader(passwd+"again:x:1000:1:dup:/:/bin/sh\n"+long+":x:7:7::/:/bin/sh\n"), strings.NewReader(group))
	if users[0] != "root" || users[1000] != "user" || groups[50] != "staff" || groups[1000] != "user" {
		t.Fatalf("users %v groups %v", users, groups)
	}
	if _, ok := users[7]; ok {
		t.Errorf("a name longer than %d was kept", maxName)
	}
	if len(users) != 2 {
		t.Errorf("malformed lines were kept: %v", users)
	}
	if u, g := Names(nil, nil); len(u)+len(g) != 0 {
		t.Errorf("no databases: %v %v", u, g)
	}
}
