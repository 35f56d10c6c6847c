package agent

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// TestPeerProgramAttacks runs real clients as an unprivileged user against
// a listener and identifies each connection as the egress agent does: the
// program itself is named, and a renamed copy, a symlink, argv[0], an
// LD_PRELOAD from a writable directory and a socket shared with another
// program do not borrow its name. (Unconfined, each trick does reach the
// listener: the connection is made every time; only the name is refused.)
func TestPeerProgramAttacks(t *testing.T) {
	testutil.RequireRoot(t)
	curl := testutil.RequireBinary(t, "curl")
	curl, _ = filepath.EvalSymlinks(curl)
	py, err := filepath.EvalSymlinks("/usr/bin/python3") // the system's, which nobody may run
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	url := "http://" + ln.Addr().String() + "/"
	own := nobodyDir(t) // the attacker's own (writable) directory
	copyFile(t, curl, filepath.Join(own, "git"), 0o755)
	if err := os.Symlink(curl, filepath.Join(own, "link-git")); err != nil {
		t.Fatal(err)
	}
	lib, err := filepath.EvalSymlinks("/usr/lib/x86_64-linux-gnu/libz.so.1")
	if err != nil {
		t.Skip("no libz to preload")
	}
	copyFile(t, lib, filepath.Join(own, "libz.so.1"), 0o755)
	shared := "import socket,subprocess,sys\ns=socket.create_connection(('127.0.0.1',int(sys.argv[1])))\n" +
		"s.sendall(b'GET / HTTP/1.1\\r\\n\\r\\n')\n" +
		// The second holder stays alive while it is checked (a child that
		// exits at once is caught between losing its executable and its
		// descriptors), and goes when the connection does.
		"p=subprocess.Popen(['/bin/sleep','60'],pass_fds=[s.fileno()])\ntry:\n s.recv(1)\nexcept OSError:\n pass\np.kill()\np.wait()\n"
	port := ln.Addr().(*net.TCPAddr).Port
	for _, tc := range []struct {
		name    string
		path    string
		args    []string
		env     []string
		want    string // program, or "" with wantErr in the reason
		wantErr string
		asRoot  bool
	}{
		{name: "curl", path: curl, args: []string{"curl", "-s", url}, want: curl},
		{name: "argv0 git", path: curl, args: []string{"git", "-s", url}, want: curl},
		{name: "symlink named git", path: filepath.Join(own, "link-git"), args: []string{"git", "-s", url}, want: curl},
		{name: "renamed copy", path: filepath.Join(own, "git"), args: []string{"git", "-s", url}, wantErr: "owned by the process's user"},
		{name: "LD_PRELOAD", path: curl, args: []string{"curl", "-s", url}, env: []string{"LD_PRELOAD=" + filepath.Join(own, "libz.so.1")}, wantErr: "mapped code"},
		{name: "shared socket", path: py, args: []string{"python3", "-c", shared, itoa(port)}, wantErr: "two programs"},
		{name: "root on a writable mount", path: curl, args: []string{"curl", "-s", url}, asRoot: true, wantErr: "process is root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := &exec.Cmd{Path: tc.path, Args: tc.args, Env: append([]string{"PATH=/usr/bin:/bin"}, tc.env...),
				SysProcAttr: &syscall.SysProcAttr{}}
			if !tc.asRoot {
				cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 65534, Gid: 65534}
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			defer cmd.Process.Kill()
			ln.(*net.TCPListener).SetDeadline(time.Now().Add(time.Minute))
			conn, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if tc.name == "shared socket" {
				// Both holders exist once the request arrived (it is sent
				// before the child starts, so wait for the child too).
				waitHolders(t, conn, 2)
			}
			prog, err := peerProgram("/proc", conn)
			switch {
			case tc.want != "" && (err != nil || prog != tc.want):
				t.Fatalf("program %q, %v; want %s", prog, err, tc.want)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("program %q, %v; want an error with %q", prog, err, tc.wantErr)
			}
			t.Logf("%s: %q %v", tc.name, prog, err)
			if tc.name == "shared socket" {
				conn.Close() // python then ends its child (a reset included) and exits
				cmd.Wait()
			}
		})
	}
}

// waitHolders reads until conn's peer socket has n holders.
func waitHolders(t *testing.T, conn net.Conn, n int) {
	t.Helper()
	la, ra := conn.LocalAddr().(*net.TCPAddr), conn.RemoteAddr().(*net.TCPAddr)
	ino, err := socketInode("/proc/self/net/tcp", ra, la)
	if err != nil {
		t.Fatal(err)
	}
	for {
		h, err := socketHolders("/proc", ino)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) >= n {
			return
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, not a timing
	}
}

func nobodyDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "peer-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	own := filepath.Join(dir, "own")
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(own, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return own
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dst, 65534, 65534); err != nil {
		t.Fatal(err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// BenchmarkPeerProgram measures naming the program behind one connection
// (what the agent adds to each accepted egress connection): go test
// ./agent -run '^$' -bench BenchmarkPeerProgram.
func BenchmarkPeerProgram(b *testing.B) {
	testutil.RequireRoot(b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command("/usr/bin/python3", "-c", "import socket,sys\ns=socket.create_connection(('127.0.0.1',int(sys.argv[1])))\ns.recv(1)", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	conn, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := peerProgram("/proc", conn); err != nil {
			b.Fatal(err)
		}
	}
}
