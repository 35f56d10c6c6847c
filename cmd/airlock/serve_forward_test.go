package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil"
)

func TestWantsMissingBackend(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--backend", "native"}, false},
		{[]string{"--backend", "kubernetes"}, true},
		{[]string{"-backend=kubernetes"}, true},
		{[]string{"--default-backend", "kubernetes"}, true},
		{[]string{"--kubeconfig", "/k"}, true},
		{[]string{"--kube-namespace=x"}, true},
		{[]string{"--listen", "kubernetes"}, false},
		{[]string{"--", "--backend", "kubernetes"}, false},
	} {
		if got := wantsMissingBackend(tc.args); got != tc.want {
			t.Errorf("wantsMissingBackend(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

// The default build hands serve --backend kubernetes to the airlock-kube
// beside it, arguments unchanged, and without one says where it is.
func TestServeForwardsKubernetesToKubeBuild(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("a shell script stands in for airlock-kube")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "airlock")
	data, err := os.ReadFile(testutil.AirlockBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func() (string, int) {
		cmd := exec.Command(bin, "serve", "--backend", "kubernetes", "--kube-namespace", "ns 1")
		cmd.Env = append(os.Environ(), "PATH=/nonexistent")
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	out, code := run()
	if code != exitAirlock || !strings.Contains(out, "airlock-kube") {
		t.Fatalf("without airlock-kube: exit %d, %q; want 125 naming airlock-kube", code, out)
	}
	// What the stand-in prints is its argv: the forward keeps every argument.
	stub := "#!/bin/sh\nfor a in \"$0\" \"$@\"; do echo \"[$a]\"; done\nexit 7\n"
	if err := os.WriteFile(filepath.Join(dir, "airlock-kube"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	out, code = run()
	want := "[serve]\n[--backend]\n[kubernetes]\n[--kube-namespace]\n[ns 1]\n"
	if code != 7 || !strings.HasSuffix(out, want) || !strings.Contains(out, "airlock-kube]") {
		t.Fatalf("forwarded: exit %d, %q; want 7 and the arguments %q", code, out, want)
	}
}
