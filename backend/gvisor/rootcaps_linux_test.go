package gvisor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock-dev/airlock/backend/internal/idmap"
	"github.com/airlock-dev/airlock/backend/internal/rootcaps"
	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/images/imagestest"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// rangedBackend is a test backend whose sandboxes run as leased host id
// ranges (as airlock serve's do as root).
func rangedBackend(t *testing.T) *Backend {
	t.Helper()
	b := testBackend(t)
	b.cfg.WritableDir = t.TempDir()
	ids, err := idmap.Default(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b.cfg.HostIDs = ids
	return b
}

// rootSandbox is an image sandbox of r on a ranged backend, its
// processes root inside; ws ("" for none) its workspace.
func rootSandbox(t *testing.T, b *Backend, r *images.Rootfs, ws string, edit func(*policy.Policy)) (sandbox.Sandbox, int, int) {
	t.Helper()
	p, _ := policy.Profile("default")
	if edit != nil {
		edit(p)
	}
	spec := imagestest.Spec(t, r, p, ws)
	spec.ID = newID(t)
	spec.OwnWorkspace = ws != ""
	sb := create(t, b, spec)
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

func capMask(caps []int) string {
	var m uint64
	for _, c := range caps {
		m |= 1 << c
	}
	return fmt.Sprintf("%016x", m)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Root inside an image sandbox with its own id range holds the native
// backend's set (in gVisor's kernel, over the sandbox's own ids): chown,
// modes, tar x keeping owners, users switched with setuid(2) and per
// exec; a user holds nothing; on the host, what it makes belongs to the
// range, and a host file of someone outside the range stays out of reach.
func TestRootInsideImage(t *testing.T) {
	ws := reachableWorkspace(t)
	tarball := imagestest.Tar(t,
		imagestest.Entry{Name: "t/", Type: '5', UID: 1000, GID: 1000},
		imagestest.Entry{Name: "t/owned", Data: "x", Mode: 0o640, UID: 123, GID: 456},
		imagestest.Entry{Name: "t/user", Data: "y", Mode: 0o600, UID: 1000, GID: 1000},
	)
	must(t, os.WriteFile(filepath.Join(ws, "t.tar"), tarball, 0o644))
	foreign := filepath.Join(ws, "foreign")
	must(t, os.WriteFile(foreign, []byte("host\n"), 0o644))
	must(t, os.Chown(foreign, 4242, 4242))
	b := rangedBackend(t)
	sb, uid, gid := rootSandbox(t, b, imagestest.BusyboxRoot(t), ws, direct)
	set := capMask(rootcaps.Set)
	for _, c := range []struct{ script, want string }{
		{"id -u; grep -E '^Cap(Eff|Prm|Bnd|Inh|Amb)' /proc/self/status | tr -s '\\t' ' '",
			fmt.Sprintf("0\nCapInh: 0000000000000000\nCapPrm: %[1]s\nCapEff: %[1]s\nCapBnd: %[1]s\nCapAmb: 0000000000000000", set)},
		{"set -e; stat -c '%u:%g' / /etc /etc/passwd; touch /etc/f; chown 1000:1000 /etc/f; chmod 0600 /etc/f; chown 123 /etc/passwd; stat -c '%u:%g %a' /etc/f /etc/passwd",
			"0:0\n0:0\n0:0\n1000:1000 600\n123:0 644"},
		{"set -e; echo s > /home/user/secret; chown 1000 /home/user/secret; chmod 000 /home/user/secret; cat /home/user/secret; touch -d @0 /home/user/secret; stat -c %Y /home/user/secret",
			"s\n0"},
		{"set -e; cd /root; tar xf /workspace/t.tar; stat -c '%n %u:%g %a' t t/owned t/user", "t 1000:1000 755\nt/owned 123:456 640\nt/user 1000:1000 600"},
		{"set -e; cd /workspace; touch mine; mkdir d; chown 1000:1000 d; stat -c '%n %u:%g' mine d", "mine 0:0\nd 1000:1000"},
		// A host file of someone outside the range: gVisor answers chown
		// and chmod with success, but nothing changes (its gofer, the
		// range's root, may not; checked on the host below either way).
		{"chown 0 /workspace/foreign; chmod 666 /workspace/foreign; stat -c '%u %a' /workspace/foreign; (echo x >> /workspace/foreign) 2>/dev/null || echo write refused; cat /workspace/foreign",
			"65534 644\nwrite refused\nhost"},
		{"su -s /bin/sh -c 'id -u; id -g; grep CapEff /proc/self/status; cat /home/user/secret 2>&1' user",
			"1000\n1000\nCapEff:\t0000000000000000\ncat: can't open '/home/user/secret': Permission denied"},
		{"exec 2>/dev/null; su -s /bin/sh -c 'exec sleep 100' user & until pidof sleep >/dev/null; do :; done; stat -c %u /proc/$(pidof sleep); kill $(pidof sleep) && wait $!; echo $?", "1000\n143"},
	} {
		if st, out := sh(t, sb, c.script); out != c.want {
			t.Errorf("%q: exit %d\n%s\nwant\n%s", c.script, st.Code, out, c.want)
		}
	}
	var out strings.Builder
	p, err := sb.Exec(context.Background(), sandbox.ExecRequest{Args: []string{"sh", "-c", "id -u; grep CapEff /proc/self/status"}, User: "user", Stdout: &out, Stderr: &out})
	must(t, err)
	p.Wait(context.Background())
	if out.String() != "1000\nCapEff:\t0000000000000000\n" {
		t.Errorf("exec as user: %q", out.String())
	}
	var fst syscall.Stat_t
	if err := syscall.Stat(foreign, &fst); err != nil || fst.Uid != 4242 || fst.Mode&0o7777 != 0o644 {
		t.Errorf("foreign host file: owner %d mode %o %v", fst.Uid, fst.Mode&0o7777, err)
	}
	if b, _ := os.ReadFile(foreign); string(b) != "host\n" {
		t.Errorf("foreign host file: %q", b)
	}
	for name, want := range map[string][2]int{"mine": {uid, gid}, "d": {uid + 1000, gid + 1000}} {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(ws, name), &st); err != nil || int(st.Uid) != want[0] || int(st.Gid) != want[1] {
			t.Errorf("host owner of %s: %d:%d %v, want %d:%d", name, st.Uid, st.Gid, err, want[0], want[1])
		}
	}
	// The writable layer stores ids as inside (as an image layer does):
	// /etc/f, made by root inside and given to 1000, is 1000 on disk.
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(b.cfg.WritableDir, sb.ID(), "upper", "etc", "f"), &st); err != nil || st.Uid != 1000 {
		t.Errorf("writable layer's /etc/f: owner %d %v, want 1000 (inside ids)", st.Uid, err)
	}
}

// process.capabilities: none takes them away; a sandbox without a range
// (runsc as the caller, ids 1:1) keeps none either.
func TestRootInsideImageNoCapabilities(t *testing.T) {
	b := rangedBackend(t)
	sb, _, _ := rootSandbox(t, b, imagestest.BusyboxRoot(t), "", func(p *policy.Policy) { p.Process.Capabilities = policy.CapabilitiesNone })
	if _, out := sh(t, sb, "id -u; grep CapEff /proc/self/status; touch /tmp/f; chown 1000 /tmp/f 2>&1 | sed 's/.*: //'"); out != "0\nCapEff:\t0000000000000000\nOperation not permitted" {
		t.Errorf("capabilities none: %q", out)
	}
	plain := testBackend(t)
	plain.cfg.WritableDir = t.TempDir()
	ps := create(t, plain, imageSpec(t, "", direct))
	if _, out := sh(t, ps, "id -u; grep CapEff /proc/self/status"); out != "0\nCapEff:\t0000000000000000" {
		t.Errorf("image sandbox without a range: %q", out)
	}
}

// makeDeb builds a tiny Debian package with the host's dpkg-deb: a
// script in /usr/bin and a postinst that adds a system user and gives it
// a directory (useradd and chown as root, as real packages do).
func makeDeb(t *testing.T, dir, name string) {
	t.Helper()
	testutil.RequireBinary(t, "dpkg-deb")
	root := filepath.Join(t.TempDir(), name)
	for p, body := range map[string]string{
		"DEBIAN/control":  "Package: " + name + "\nVersion: 1.0\nArchitecture: all\nMaintainer: airlock tests <t@example.invalid>\nDescription: test package\n",
		"DEBIAN/postinst": "#!/bin/sh\nset -e\nuseradd --system --no-create-home " + name + "d\ninstall -d -o " + name + "d -m 0750 /var/lib/" + name + "\n",
		"usr/bin/" + name: "#!/bin/sh\necho hello from " + name + "\n",
	} {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755))
		must(t, os.WriteFile(filepath.Join(root, p), []byte(body), 0o755))
	}
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", root, filepath.Join(dir, name+"_1.0_all.deb")).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v: %s", err, out)
	}
}

// Root inside the Debian image installs packages as on a Debian machine,
// with no network: dpkg -i and apt-get install of local .debs (apt drops
// to _apt with setuid(2); the postinst adds a user and chowns to it).
func TestRootInsideDebianInstalls(t *testing.T) {
	ws := reachableWorkspace(t)
	makeDeb(t, ws, "airlock-one")
	makeDeb(t, ws, "airlock-two")
	b := rangedBackend(t)
	sb, _, _ := rootSandbox(t, b, imagestest.DebianPythonRoot(t), ws, direct)
	for _, c := range []struct{ script, want string }{
		{"dpkg -i airlock-one_1.0_all.deb >/dev/null && airlock-one && stat -c '%U %a' /var/lib/airlock-one", "hello from airlock-one\nairlock-oned 750"},
		{"apt-get install -y -q /workspace/airlock-two_1.0_all.deb >/dev/null 2>&1; echo $?; airlock-two; dpkg-query -W -f='${Status}\\n' airlock-two; stat -c %U /var/lib/airlock-two", "0\nhello from airlock-two\ninstall ok installed\nairlock-twod"},
		{"apt-get remove -y -q airlock-one >/dev/null 2>&1; echo $?; ls /usr/bin/airlock-one 2>&1", "0\nls: cannot access '/usr/bin/airlock-one': No such file or directory"},
	} {
		if st, out := sh(t, sb, c.script); out != c.want {
			t.Errorf("%q: exit %d\n%s\nwant\n%s", c.script, st.Code, out, c.want)
		}
	}
}
