package policy

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"", "version: 1\n", "version: 2\n", "- a\n", "version: 1\nx: &a [*a]\n",
		"version: 1\nsecrets: &s [*s]\n", "version: 1\nfilesystem: {read_only: [etc]}\n",
		"version: 1\nlimits: {memory: 1.5Gi, pids: unlimited, timeout: 0}\n",
		"version: 1\nnetwork: {allow: ['*.a.com:443', '10.0.0.0/8', '[::1]:80']}\n",
		"version: 1\nprocess: {env: {A: 1, B: ~}, uid: 0}\n", "version: 1\n---\nversion: 1\n",
		"version: 1\nfilesystem: {workspace: ../x, tmpfs: [~]}\n",
	} {
		f.Add([]byte(s))
	}
	env := testEnv("/lib32", "/home/alice/.codex")
	env.Environ = []string{"PATH=/usr/bin:/bin", "HOME=/home/alice", "LANG=C.UTF-8", "GH_TOKEN=x", "LC_ALL=C", "GOFLAGS=-mod=mod"}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("f.yaml", data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse error is not ErrInvalid: %v", err)
			}
			return
		}
		r, err := p.Resolve(env)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Resolve error is not ErrInvalid: %v", err)
			}
			return
		}
		if err := r.ValidateResolved(); err != nil {
			t.Fatalf("Resolve result fails ValidateResolved: %v", err)
		}
		// What `policy show` prints must read back as the same policy.
		out, err := r.YAML()
		if err != nil {
			t.Fatalf("YAML: %v", err)
		}
		p2, err := Parse("shown.yaml", out)
		if err != nil {
			t.Fatalf("shown policy does not parse: %v\n%s", err, out)
		}
		r2, err := p2.Resolve(env)
		if err != nil {
			t.Fatalf("shown policy does not resolve: %v\n%s", err, out)
		}
		r.src, r2.src = nil, nil
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("shown policy differs:\n%+v\n%+v\n%s", r, r2, out)
		}
		// So must its JSON (the HTTP API returns policies as JSON).
		js, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("JSON: %v", err)
		}
		p3, err := Parse("api.json", js)
		if err != nil {
			t.Fatalf("JSON policy does not parse: %v\n%s", err, js)
		}
		r3, err := p3.Resolve(env)
		if err != nil {
			t.Fatalf("JSON policy does not resolve: %v\n%s", err, js)
		}
		r3.src = nil
		if !reflect.DeepEqual(r, r3) {
			t.Fatalf("JSON policy differs:\n%+v\n%+v\n%s", r, r3, js)
		}
		_ = r.Environ([]string{"PATH=/bin", "A_TOKEN=x"})
		_ = r.ConfigGuard("/home/x")
	})
}

func FuzzParseNetworkEntry(f *testing.F) {
	for _, s := range []string{"example.com", "*.example.com:443", "10.0.0.0/8", "[::1]:80", "::1", "1.2.3.4:5", "a_b.c", "x:0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseNetworkEntry(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error is not ErrInvalid: %v", err)
			}
			return
		}
		e2, err := ParseNetworkEntry(e.String())
		if err != nil || e2 != e {
			t.Fatalf("canonical form %q of %q does not round-trip: %+v %v", e.String(), s, e2, err)
		}
	})
}

func FuzzParseByteSize(f *testing.F) {
	for _, s := range []string{"0", "512Mi", "2G", "100k", "1.5Gi", "7Ei", "unlimited"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseByteSize(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error is not ErrInvalid: %v", err)
			}
			return
		}
		if b < 0 && b != Unlimited {
			t.Fatalf("ParseByteSize(%q) = %d", s, int64(b))
		}
		if b >= 0 {
			if b2, err := ParseByteSize(b.String()); err != nil || b2 != b {
				t.Fatalf("String %q of %d does not round-trip: %d %v", b.String(), int64(b), int64(b2), err)
			}
		}
	})
}
