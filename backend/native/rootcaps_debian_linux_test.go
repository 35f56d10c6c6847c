package native

import (
	"archive/zip"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/images/imagestest"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/sandbox"
)

// makeDeb builds a tiny Debian package in dir with the host's dpkg-deb:
// a script in /usr/bin and a postinst that adds a system user and gives
// it a directory (useradd and chown as root, as real packages do).
func makeDeb(t *testing.T, dir, name string) string {
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
	deb := filepath.Join(dir, name+"_1.0_all.deb")
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", root, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v: %s", err, out)
	}
	return deb
}

// makeWheel writes a pure-Python wheel (a zip, PEP 427) to dir.
func makeWheel(t *testing.T, dir string) string {
	t.Helper()
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	for name, body := range map[string]string{
		"airlock_hello/__init__.py":                 "GREETING = 'hello from a wheel'\n",
		"airlock_hello-1.0.dist-info/METADATA":      "Metadata-Version: 2.1\nName: airlock-hello\nVersion: 1.0\n",
		"airlock_hello-1.0.dist-info/WHEEL":         "Wheel-Version: 1.0\nGenerator: airlock-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
		"airlock_hello-1.0.dist-info/RECORD":        "",
		"airlock_hello-1.0.dist-info/top_level.txt": "airlock_hello\n",
	} {
		w, err := z.Create(name)
		must(t, err)
		_, err = w.Write([]byte(body))
		must(t, err)
	}
	must(t, z.Close())
	p := filepath.Join(dir, "airlock_hello-1.0-py3-none-any.whl")
	must(t, os.WriteFile(p, buf.Bytes(), 0o644))
	return p
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Root inside the Debian image installs packages as on a Debian machine,
// with no network: dpkg -i and apt-get install of local .debs (apt drops
// to _apt with setuid(2); the postinst adds a user and chowns to it),
// then pip install of a local wheel.
func TestRootInsideDebianInstalls(t *testing.T) {
	ws := reachableWorkspace(t)
	makeDeb(t, ws, "airlock-one")
	makeDeb(t, ws, "airlock-two")
	sb, _, _ := rootSandbox(t, imagestest.DebianPythonRoot(t), ws, nil)
	for _, c := range []struct{ script, want string }{
		{"dpkg -i airlock-one_1.0_all.deb >/dev/null && airlock-one && stat -c '%U %a' /var/lib/airlock-one", "hello from airlock-one\nairlock-oned 750"},
		{"apt-get install -y -q /workspace/airlock-two_1.0_all.deb >/dev/null 2>&1; echo $?; airlock-two; dpkg-query -W -f='${Status}\\n' airlock-two; stat -c %U /var/lib/airlock-two", "0\nhello from airlock-two\ninstall ok installed\nairlock-twod"},
		{"apt-get remove -y -q airlock-one >/dev/null 2>&1; echo $?; ls /usr/bin/airlock-one 2>&1", "0\nls: cannot access '/usr/bin/airlock-one': No such file or directory"},
	} {
		if st, out := sh(t, sb, c.script); out != c.want {
			t.Errorf("%q: exit %d\n%s\nwant\n%s", c.script, st.Code, out, c.want)
		}
	}
	makeWheel(t, ws)
	if st, out := sh(t, sb, "pip install -q --no-index --break-system-packages ./airlock_hello-1.0-py3-none-any.whl 2>&1 | grep -v WARNING; cd /; python3 -c 'import airlock_hello; print(airlock_hello.GREETING, airlock_hello.__file__)'"); out != "hello from a wheel /usr/local/lib/python3.11/dist-packages/airlock_hello/__init__.py" {
		t.Errorf("pip install: exit %d\n%s", st.Code, out)
	}
}

// cpythonModules are CPython regression-test modules that exercise what
// root inside touches (ownership, modes, links, users, processes).
var cpythonModules = []string{"test_os", "test_posix", "test_tarfile", "test_shutil", "test_tempfile",
	"test_pathlib", "test_stat", "test_glob", "test_fileio", "test_pwd", "test_grp", "test_fnmatch",
	"test_zipfile", "test_subprocess"}

// CPython's own tests, as root inside the Debian image: each module
// passes (its skips are its own: no network, no terminal) but for
// test_posix's three chown tests, which chown to uid 2^31 as root: beyond
// the sandbox's 65536 ids, so EINVAL (RATIONALE: as in any user
// namespace with a partial map). They must fail with exactly that.
func TestRootInsideCPythonTests(t *testing.T) {
	sb, _, _ := rootSandbox(t, imagestest.DebianPythonRoot(t), "", nil)
	run := func(args ...string) (int, string) {
		var out bytes.Buffer
		ctx := context.Background()
		p, err := sb.Exec(ctx, sandbox.ExecRequest{Args: append([]string{"python3", "-m", "test"}, args...), Dir: "/tmp", Stdout: &out, Stderr: &out})
		must(t, err)
		st, err := p.Wait(ctx)
		must(t, err)
		return st.Code, out.String()
	}
	beyondRange := []string{"test_chown", "test_fchown", "test_lchown"}
	passed := 0
	for _, m := range cpythonModules {
		args := []string{"-q", m}
		if m == "test_posix" {
			for _, name := range beyondRange {
				args = append(args, "--ignore", name)
			}
		}
		if code, out := run(args...); code != 0 {
			t.Errorf("%s: exit %d\n%s", m, code, tail(out, 3000))
			continue
		}
		passed++
	}
	t.Logf("CPython regression modules as root inside: %d/%d pass (test_posix without its 3 chown-to-2^31 tests)", passed, len(cpythonModules))
	args := []string{"-v", "test_posix"}
	for _, name := range beyondRange {
		args = append(args, "-m", name)
	}
	_, out := run(args...)
	if n := strings.Count(out, "OSError: [Errno 22] Invalid argument"); n != len(beyondRange) || !strings.Contains(out, "FAILED (errors=3") {
		t.Errorf("test_posix's chown tests: want 3 errors, each EINVAL (uid 2^31 beyond the range); got %d:\n%s", n, tail(out, 3000))
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return strings.TrimSpace(s)
}
