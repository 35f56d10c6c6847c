package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// sbServe starts a real `airlock serve` with backend for the CLI tests and
// returns its socket.
func sbServe(t *testing.T, backend string) string {
	t.Helper()
	return sbServeWith(t, backend)
}

// sbServeWith is sbServe with more serve flags.
func sbServeWith(t *testing.T, backend string, args ...string) string {
	t.Helper()
	testutil.RequireLinux(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "airlock.sock")
	cmd := exec.Command(testutil.AirlockBinary(t), append([]string{"serve", "--socket", sock, "--data", filepath.Join(dir, "data"), "--backend", backend}, args...)...)
	var logb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logb, &logb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			return sock
		}
		if time.Now().After(deadline) || cmd.ProcessState != nil {
			t.Fatalf("airlock serve did not start: %s", logb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sbCLI runs `airlock sandbox ARGS` against sock.
func sbCLI(t *testing.T, sock string, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(testutil.AirlockBinary(t), append([]string{"sandbox"}, args...)...)
	cmd.Env = append(os.Environ(), "AIRLOCK_HOST=unix://"+sock)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// The CLI's lifecycle and file commands against a real server (the wasm
// backend runs everywhere).
func TestSandboxCLIFiles(t *testing.T) {
	sock := sbServe(t, "wasm")
	id, errOut, code := sbCLI(t, sock, "", "create", "--label", "cli=yes", "--timeout", "5m")
	id = strings.TrimSpace(id)
	if code != 0 || !strings.HasPrefix(id, "sb-") {
		t.Fatalf("create: %d %q %q", code, id, errOut)
	}
	out, _, code := sbCLI(t, sock, "", "ls", "--label", "cli=yes")
	if code != 0 || !strings.Contains(out, id) {
		t.Fatalf("ls: %d %q", code, out)
	}
	if out, _, _ := sbCLI(t, sock, "", "ls", "--label", "cli=no"); strings.Contains(out, id) {
		t.Fatalf("ls with another label lists %s", id)
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "tree", "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "tree", "sub", "f.txt"), []byte("nested\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "one.bin"), []byte{0, 1, 2, 255}, 0o644)
	for _, args := range [][]string{
		{"cp", filepath.Join(dir, "one.bin"), id + ":/tmp/one.bin"},
		{"cp", filepath.Join(dir, "tree"), id + ":/tmp/tree"},
		{"cp", id + ":/tmp/one.bin", filepath.Join(dir, "back.bin")},
		{"cp", id + ":/tmp/tree", filepath.Join(dir, "treeback")},
	} {
		if _, errOut, code := sbCLI(t, sock, "", args...); code != 0 {
			t.Fatalf("%v: %d %s", args, code, errOut)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "back.bin")); !bytes.Equal(b, []byte{0, 1, 2, 255}) {
		t.Fatalf("file round trip: %v", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "treeback", "sub", "f.txt")); string(b) != "nested\n" {
		t.Fatalf("tree round trip: %q", b)
	}
	out, _, code = sbCLI(t, sock, "", "inspect", id)
	if code != 0 || !strings.Contains(out, `"state": "running"`) {
		t.Fatalf("inspect: %d %s", code, out)
	}
	// Events are for people by default, JSON lines with --json.
	out, _, code = sbCLI(t, sock, "", "logs", id)
	if code != 0 || !strings.Contains(out, " file ") || !strings.Contains(out, "path=/tmp/one.bin") || strings.Contains(out, "{") {
		t.Fatalf("logs: %d %s", code, out)
	}
	out, _, code = sbCLI(t, sock, "", "logs", "--json", id)
	if code != 0 || !strings.Contains(out, `"type":"file"`) {
		t.Fatalf("logs --json: %d %s", code, out)
	}
	if _, errOut, code := sbCLI(t, sock, "", "rm", id); code != 0 {
		t.Fatalf("rm: %d %s", code, errOut)
	}
	_, errOut, code = sbCLI(t, sock, "", "cp", filepath.Join(dir, "one.bin"), id+":/tmp/x")
	if code != exitAirlock || !strings.Contains(errOut, "not found") {
		t.Fatalf("cp into a removed sandbox: %d %q", code, errOut)
	}
	_, errOut, code = sbCLI(t, sock, "", "create", "--backend", "nope")
	if code != exitAirlock || !strings.Contains(errOut, "unknown backend") {
		t.Fatalf("unknown backend: %d %q", code, errOut)
	}
}

// exec passes stdout, stderr, stdin and the exit status through.
func TestSandboxCLIExec(t *testing.T) {
	testutil.RequireRoot(t)
	sock := sbServe(t, "native")
	id, errOut, code := sbCLI(t, sock, "", "create")
	id = strings.TrimSpace(id)
	if code != 0 {
		t.Fatalf("create: %d %s", code, errOut)
	}
	out, errOut, code := sbCLI(t, sock, "", "exec", id, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
	if code != 7 || out != "out\n" || errOut != "err\n" {
		t.Fatalf("exec: %d %q %q", code, out, errOut)
	}
	out, _, code = sbCLI(t, sock, "piped input\n", "exec", "-i", id, "--", "cat")
	if code != 0 || out != "piped input\n" {
		t.Fatalf("exec -i: %d %q", code, out)
	}
	_, _, code = sbCLI(t, sock, "", "exec", id, "--", "/no/such/command")
	if code != exitNotFound {
		t.Fatalf("missing command: exit %d, want %d", code, exitNotFound)
	}
}

// exec's exit codes come from error kinds (Docker's convention): 127 only
// for a command that does not exist, 126 for one that cannot be executed,
// 125 for airlock's own failures, even when the sandbox's name contains
// "exec".
func TestSandboxCLIExecExitCodes(t *testing.T) {
	sock := sbServe(t, "wasm")
	id, errOut, code := sbCLI(t, sock, "", "create")
	id = strings.TrimSpace(id)
	if code != 0 {
		t.Fatalf("create: %d %s", code, errOut)
	}
	for _, tc := range []struct {
		args []string
		want int
		msg  string
	}{
		{[]string{"exec", "sb-execnope", "--", "true"}, exitAirlock, "not found"},
		{[]string{"exec", id, "--", "/no/such/command"}, exitNotFound, "command not found"},
		{[]string{"exec", id, "--", "/tmp"}, exitCannotRun, "cannot execute"},
	} {
		_, errOut, code := sbCLI(t, sock, "", tc.args...)
		if code != tc.want || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%v: exit %d %q, want %d and %q", tc.args, code, errOut, tc.want, tc.msg)
		}
	}
}

// cp - reads a tar (plain or gzip) from stdin into a sandbox directory,
// cp ID:/dir - writes one to stdout (docker cp's convention).
func TestSandboxCLICopyTarStreams(t *testing.T) {
	sock := sbServe(t, "wasm")
	id, errOut, code := sbCLI(t, sock, "", "create")
	id = strings.TrimSpace(id)
	if code != 0 {
		t.Fatalf("create: %d %s", code, errOut)
	}
	var plain bytes.Buffer
	tw := tar.NewWriter(&plain)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "d/", Mode: 0o755})
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "d/f.txt", Mode: 0o644, Size: 6})
	tw.Write([]byte("hello\n"))
	tw.Close()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(plain.Bytes())
	zw.Close()
	for name, in := range map[string][]byte{"plain": plain.Bytes(), "gzip": gz.Bytes()} {
		if _, errOut, code := sbCLI(t, sock, string(in), "cp", "-", id+":/tmp/"+name); code != 0 {
			t.Fatalf("cp - (%s): %d %s", name, code, errOut)
		}
		out, errOut, code := sbCLI(t, sock, "", "cp", id+":/tmp/"+name+"/d", "-")
		if code != 0 {
			t.Fatalf("cp to stdout (%s): %d %s", name, code, errOut)
		}
		tr := tar.NewReader(strings.NewReader(out))
		found := ""
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			if h.Name == "d/f.txt" {
				b, _ := io.ReadAll(tr)
				found = string(b)
			}
		}
		if found != "hello\n" {
			t.Fatalf("%s: the tar on stdout lacks d/f.txt with its content (got %q)", name, found)
		}
	}
}

// The CLI's own failures say what to do: --host works anywhere before
// the command, a missing server is named as such, and the usage of exec
// lists every flag.
func TestSandboxCLIHostAndMessages(t *testing.T) {
	sock := sbServe(t, "wasm")
	bin := testutil.AirlockBinary(t)
	run := func(env []string, args ...string) (string, string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return out.String(), errb.String(), code
	}
	noHost := []string{"AIRLOCK_HOST=unix:///nonexistent/airlock.sock"}
	if out, errOut, code := run(noHost, "sandbox", "ls", "--host", "unix://"+sock); code != 0 || !strings.Contains(out, "ID") {
		t.Errorf("ls --host after the command: %d %q %q", code, out, errOut)
	}
	if _, errOut, code := run(noHost, "sandbox", "ls"); code != exitAirlock || !strings.Contains(errOut, "airlock serve") {
		t.Errorf("no server: %d %q, want 125 and a hint that airlock serve is not running", code, errOut)
	}
	if out, _, code := run(nil, "sandbox", "--help"); code != 0 || !strings.Contains(out, "--timeout D] ID -- CMD") {
		t.Errorf("sandbox --help: %d, want 0 and a usage on stdout naming exec's --timeout: %q", code, out)
	}
	// The key and quota commands never create a store of their own.
	data := filepath.Join(t.TempDir(), "no-server-here")
	if _, errOut, code := run(nil, "serve", "key", "create", "--tenant", "t1", "--data", data); code != exitAirlock || !strings.Contains(errOut, "no store") {
		t.Errorf("key create without a server's store: %d %q", code, errOut)
	}
	if _, err := os.Stat(data); err == nil {
		t.Errorf("key create made a data directory at %s", data)
	}
}
