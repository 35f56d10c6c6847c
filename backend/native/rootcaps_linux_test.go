package native

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock-dev/airlock/backend/internal/idmap"
	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/images/imagestest"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// rootSandbox starts an image sandbox of r with its own host id range
// (as airlock serve gives every sandbox when root): root inside, with
// workspace ws ("" for none), edit applied to the policy first.
func rootSandbox(t *testing.T, r *images.Rootfs, ws string, edit func(*policy.Policy)) (sandbox.Sandbox, int, int) {
	t.Helper()
	b := testBackend(t)
	b.cfg.WritableDir = t.TempDir()
	ids, err := idmap.Default(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b.cfg.HostIDs = ids
	p, _ := policy.Profile("default")
	if edit != nil {
		edit(p)
	}
	spec := imagestest.Spec(t, r, p, ws)
	spec.ID = newID(t)
	spec.OwnWorkspace = ws != ""
	sb, err := b.Create(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	uid, gid := sb.(sandbox.HostIdentity).HostIDs()
	if uid < idmap.DefaultBase || gid < idmap.DefaultBase {
		t.Fatalf("host ids %d/%d, want a leased range", uid, gid)
	}
	return sb, uid, gid
}

// reachableWorkspace is a workspace the range's uids can reach (its
// parents searchable).
func reachableWorkspace(t *testing.T) string {
	ws := workspace(t)
	os.Chmod(filepath.Dir(ws), 0o755)
	os.Chmod(filepath.Dir(filepath.Dir(ws)), 0o755)
	return ws
}

// capMask is the CapEff line /proc/<pid>/status shows for caps.
func capMask(caps []int) string {
	var m uint64
	for _, c := range caps {
		m |= 1 << c
	}
	return fmt.Sprintf("%016x", m)
}

// Root inside an image sandbox with its own id range holds the default
// set over its own namespace: chown, chmod, tar x keeping owners, users
// switched with setuid(2); a non-root user holds nothing; files made in
// the workspace belong on the host to the range's uids.
func TestRootInsideImage(t *testing.T) {
	ws := reachableWorkspace(t)
	tarball := imagestest.Tar(t,
		imagestest.Entry{Name: "t/", Type: '5', UID: 1000, GID: 1000},
		imagestest.Entry{Name: "t/owned", Data: "x", Mode: 0o640, UID: 123, GID: 456},
		imagestest.Entry{Name: "t/user", Data: "y", Mode: 0o600, UID: 1000, GID: 1000},
	)
	// Into the workspace: a tree of root's with others' files (its
	// writes there go through the host's mediator, which creates as the
	// range's root without capabilities: see RATIONALE).
	wsTar := imagestest.Tar(t,
		imagestest.Entry{Name: "w/", Type: '5'},
		imagestest.Entry{Name: "w/owned", Data: "x", Mode: 0o640, UID: 123, GID: 456},
		imagestest.Entry{Name: "w/user", Data: "y", Mode: 0o600, UID: 1000, GID: 1000},
	)
	for name, b := range map[string][]byte{"t.tar": tarball, "w.tar": wsTar} {
		if err := os.WriteFile(filepath.Join(ws, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A host file of someone outside the range, in the workspace: host
	// root can change it; root inside cannot (its capabilities cover
	// only its own ids), in the kernel or through the mediator.
	foreign := filepath.Join(ws, "foreign")
	must(t, os.WriteFile(foreign, []byte("host\n"), 0o644))
	must(t, os.Chown(foreign, 4242, 4242))
	must(t, os.Chmod(foreign, 0o640))
	must(t, os.Chmod(foreign, 0o644))
	hostMemfd, _ := os.ReadFile("/proc/sys/vm/memfd_noexec")
	sb, uid, gid := rootSandbox(t, imagestest.BusyboxRoot(t), ws, nil)
	for _, c := range []struct{ script, want string }{
		{"id -u; grep -E '^Cap(Eff|Prm|Bnd|Inh|Amb)' /proc/self/status | tr -s '\\t' ' '",
			fmt.Sprintf("0\nCapInh: 0000000000000000\nCapPrm: %[1]s\nCapEff: %[1]s\nCapBnd: %[1]s\nCapAmb: 0000000000000000", capMask(rootCapabilities))},
		{"set -e; touch /etc/f; chown 1000:1000 /etc/f; chmod 0600 /etc/f; chown 123 /etc/passwd; stat -c '%u:%g %a' /etc/f /etc/passwd",
			"1000:1000 600\n123:0 644"},
		// DAC override and fowner: root reads and re-modes a user's file.
		{"set -e; echo s > /home/user/secret; chown 1000 /home/user/secret; chmod 000 /home/user/secret; cat /home/user/secret; touch -d @0 /home/user/secret; stat -c %Y /home/user/secret",
			"s\n0"},
		{"set -e; cd /root; tar xf /workspace/t.tar; stat -c '%n %u:%g %a' t t/owned t/user", "t 1000:1000 755\nt/owned 123:456 640\nt/user 1000:1000 600"},
		{"set -e; cd /workspace; tar xf w.tar; touch mine; stat -c '%n %u:%g' w/owned w/user mine", "w/owned 123:456\nw/user 1000:1000\nmine 0:0"},
		// In the workspace too, root overrides modes of its range's files
		// (the host's mediator performs these opens, as root inside would):
		// a tree whose directory is another user's, a file it made 000.
		{"set -e; cd /workspace; tar xf t.tar; stat -c '%n %u:%g %a' t t/owned t/user; chmod 000 mine; echo y > mine; cat mine; mkdir t/d; ln -s d t/l; stat -c '%n %u' t/d t/l",
			"t 1000:1000 755\nt/owned 123:456 640\nt/user 1000:1000 600\ny\nt/d 0\nt/l 0"},
		{"chmod 0600 /workspace/foreign 2>&1; chmod 0755 /workspace/foreign 2>&1; chown 0 /workspace/foreign 2>&1; (echo x >> /workspace/foreign) 2>/dev/null || echo write refused; cat /workspace/foreign",
			"chmod: /workspace/foreign: Operation not permitted\nchmod: /workspace/foreign: Operation not permitted\nchown: /workspace/foreign: Operation not permitted\nwrite refused\nhost"},
		// memfds sealed non-executable, as in a 1:1 sandbox (the host wrote
		// the sysctl of its pid namespace; the host's own is untouched).
		{"cat /proc/sys/vm/memfd_noexec", "2"},
		// setuid(2): root becomes the user, which then holds nothing.
		{"su -s /bin/sh -c 'id -u; id -g; grep CapEff /proc/self/status; cat /home/user/secret 2>&1' user",
			"1000\n1000\nCapEff:\t0000000000000000\ncat: can't open '/home/user/secret': Permission denied"},
		// Kill: root signals another user's process.
		{"exec 2>/dev/null; su -s /bin/sh -c 'exec sleep 100' user & until pidof sleep >/dev/null; do :; done; stat -c %u /proc/$(pidof sleep); kill $(pidof sleep) && wait $!; echo $?", "1000\n143"},
	} {
		if st, out := sh(t, sb, c.script); out != c.want {
			t.Errorf("%q: exit %d\n%s\nwant\n%s", c.script, st.Code, out, c.want)
		}
	}
	// A per-exec user: ids from the image's /etc/passwd, no capability.
	var out strings.Builder
	p, err := sb.Exec(context.Background(), sandbox.ExecRequest{Args: []string{"sh", "-c", "id -u; grep CapEff /proc/self/status"}, User: "user", Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	p.Wait(context.Background())
	if out.String() != "1000\nCapEff:\t0000000000000000\n" {
		t.Errorf("exec as user: %q", out.String())
	}
	if b, _ := os.ReadFile("/proc/sys/vm/memfd_noexec"); string(b) != string(hostMemfd) {
		t.Errorf("the host's memfd_noexec changed: %q, was %q", b, hostMemfd)
	}
	if b, err := os.ReadFile(foreign); err != nil || string(b) != "host\n" {
		t.Errorf("foreign host file: %q %v", b, err)
	}
	var fst syscall.Stat_t
	if err := syscall.Stat(foreign, &fst); err != nil || fst.Uid != 4242 || fst.Mode&0o7777 != 0o644 {
		t.Errorf("foreign host file: owner %d mode %o %v", fst.Uid, fst.Mode&0o7777, err)
	}
	// On the host, the workspace's files are the range's: root inside is
	// the range's first uid, its uid 123 the range's 123rd.
	for name, want := range map[string][2]int{"mine": {uid, gid}, "w/owned": {uid + 123, gid + 456}, "w/user": {uid + 1000, gid + 1000}} {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(ws, name), &st); err != nil || int(st.Uid) != want[0] || int(st.Gid) != want[1] {
			t.Errorf("host owner of %s: %d:%d %v, want %d:%d", name, st.Uid, st.Gid, err, want[0], want[1])
		}
	}
}

// process.capabilities: none takes them away: root inside is as in every
// other sandbox.
func TestRootInsideImageCapabilitiesNone(t *testing.T) {
	sb, _, _ := rootSandbox(t, imagestest.BusyboxRoot(t), "", func(p *policy.Policy) { p.Process.Capabilities = policy.CapabilitiesNone })
	if _, out := sh(t, sb, "id -u; grep CapEff /proc/self/status; touch /etc/f; chown 1000 /etc/f 2>&1"); out != "0\nCapEff:\t0000000000000000\nchown: /etc/f: Operation not permitted" {
		t.Errorf("capabilities none: %q", out)
	}
}

// Sandboxes without a range keep today's model: root inside (the host's
// root caller, ids 1:1) holds nothing.
func TestNoRangeNoCapabilities(t *testing.T) {
	b := testBackend(t)
	b.cfg.WritableDir = t.TempDir()
	sb, err := b.Create(context.Background(), imageSpec(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	if _, out := sh(t, sb, "id -u; grep CapEff /proc/self/status"); out != "0\nCapEff:\t0000000000000000" {
		t.Errorf("image sandbox without a range: %q", out)
	}
	ids, err := idmap.Default(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b.cfg.HostIDs = ids
	hs, err := b.Create(context.Background(), sandbox.Spec{ID: newID(t), Policy: testPolicy(t, "none", nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Destroy(context.Background())
	if _, out := sh(t, hs, "id -u; grep CapEff /proc/self/status"); out != "0\nCapEff:\t0000000000000000" {
		t.Errorf("host-rootfs sandbox with a range: %q", out)
	}
	_ = strconv.Itoa
}
