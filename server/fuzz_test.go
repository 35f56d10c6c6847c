package server

import (
	"archive/tar"
	"errors"
	"path"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/guestpath"
)

// FuzzDecodeRequests: request decoding never panics, and every failure is
// an invalid-argument error (a 4xx), never something that reaches a backend.
func FuzzDecodeRequests(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"backend":"native","profile":"default","timeout":"30s","labels":{"a":"b"},"env":{"K":"V"}}`,
		`{"args":["echo","hi"],"stdin":"aGk=","background":true,"encoding":"text"}`,
		`{"policy":{"network":{"mode":"allowlist","allow":["example.com:443"]}}}`,
		`{"timeout":"-1s"}`, `{"args":[1]}`, `{"a":1}`, `[`, `null`, `{"keep_alive":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		targets := []any{&api.CreateSandboxRequest{}, &api.ExecRequest{}, &api.PatchSandboxRequest{},
			&api.RenameRequest{}, &api.NetworkRequest{}, &api.PTYStart{}, &api.SignalRequest{}}
		for _, v := range targets {
			err := decodeJSONBytes(b, v)
			if err != nil && !errors.Is(err, sandbox.ErrInvalid) {
				t.Fatalf("decode %T: error of the wrong kind: %v", v, err)
			}
			if err != nil {
				if st, _ := statusOf(err); st/100 != 4 {
					t.Fatalf("decode %T: status %d for %v", v, st, err)
				}
			}
		}
		var er api.ExecRequest
		if decodeJSONBytes(b, &er) == nil {
			if err := checkArgv(er.Args); err == nil {
				n := 0
				for _, a := range er.Args {
					n += len(a) + 1
					if strings.IndexByte(a, 0) >= 0 {
						t.Fatal("argv with NUL accepted")
					}
				}
				if len(er.Args) > maxArgs || n > maxArgvBytes {
					t.Fatal("oversized argv accepted")
				}
			}
		}
	})
}

// FuzzCleanPath: an accepted path is absolute, clean, NUL-free and has no
// ".." component; a refused one is an invalid-argument error.
func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"/", "/tmp/x", "/tmp/../etc", "../x", "x", "/a//b/./c", "/a/\x00", "/..", "/a/..b/c", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		c, err := guestpath.Clean(p)
		if err != nil {
			if !errors.Is(err, sandbox.ErrInvalid) {
				t.Fatalf("guestpath.Clean(%q): wrong kind %v", p, err)
			}
			return
		}
		if !strings.HasPrefix(c, "/") || path.Clean(c) != c || strings.IndexByte(c, 0) >= 0 {
			t.Fatalf("guestpath.Clean(%q) = %q: not absolute and clean", p, c)
		}
		for _, comp := range strings.Split(c, "/") {
			if comp == ".." {
				t.Fatalf("guestpath.Clean(%q) = %q keeps ..", p, c)
			}
		}
		r, err := guestpath.CleanRel(strings.TrimPrefix(p, "/"))
		if err == nil && (strings.HasPrefix(r, "/") || r == ".." || strings.HasPrefix(r, "../") || strings.Contains(r, "/../")) {
			t.Fatalf("guestpath.CleanRel(%q) = %q escapes", p, r)
		}
	})
}

// FuzzTarHeader: an accepted upload entry is a file or directory whose
// name stays inside the target directory.
func FuzzTarHeader(f *testing.F) {
	f.Add("a/b.txt", byte(tar.TypeReg), "", int64(3))
	f.Add("../x", byte(tar.TypeReg), "", int64(1))
	f.Add("l", byte(tar.TypeSymlink), "/etc", int64(0))
	f.Add("d/", byte(tar.TypeDir), "", int64(0))
	f.Fuzz(func(t *testing.T, name string, typ byte, link string, size int64) {
		e, err := checkTarHeader(&tar.Header{Name: name, Typeflag: typ, Linkname: link, Size: size})
		if err != nil {
			return
		}
		// A GNU sparse file is a regular file, counted by its size.
		if typ != tar.TypeReg && typ != tar.TypeDir && typ != tar.TypeGNUSparse {
			t.Fatalf("type %q accepted", typ)
		}
		target := path.Join("/dst", e.rel)
		if target != "/dst" && !strings.HasPrefix(target, "/dst/") {
			t.Fatalf("entry %q lands at %q, outside /dst", name, target)
		}
		if e.size < 0 {
			t.Fatal("negative size accepted")
		}
	})
}
