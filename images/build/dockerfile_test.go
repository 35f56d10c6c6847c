package build

import (
	"errors"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/errdefs"
)

func TestParse(t *testing.T) {
	ins, err := Parse("Dockerfile", []byte("# syntax=docker/dockerfile:1\nARG BASE=busybox\nFROM ${BASE}\n\nRUN echo a && \\\n  # a comment\n  echo b\nCOPY --chmod=644 a b /dst/\nCMD [\"sh\", \"-c\", \"x\"]\nENV A=1 B=\"two words\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) != 6 || ins[2].Cmd != "RUN" || ins[2].Line != 5 || ins[2].Args != "echo a &&  echo b" {
		t.Fatalf("%+v", ins)
	}
	if ins[3].Flags[0] != "--chmod=644" || ins[4].Exec[2] != "x" {
		t.Errorf("%+v %+v", ins[3], ins[4])
	}
	for _, c := range []struct{ df, want string }{
		{"FROM a\nEXPOSE 80\n", "Dockerfile:2: EXPOSE is not supported"},
		{"FROM a\nFROM b\n", "Dockerfile:2: a second FROM"},
		{"RUN x\nFROM a\n", "Dockerfile:1: RUN before FROM"},
		{"FROM a\nRUN [\"x\",\n", "bad JSON"},
		{"ENV A=1\nFROM a\n", "Dockerfile:1: ENV before FROM"},
		{"FROM a\nHEALTHCHECK NONE\n", "Dockerfile:2: HEALTHCHECK"},
	} {
		_, err := Parse("Dockerfile", []byte(c.df))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.df, err, c.want)
		}
	}
	if _, err := Parse("Dockerfile", []byte("FROM a\nONBUILD RUN x\n")); !errors.Is(err, errdefs.ErrNotSupported) {
		t.Errorf("ONBUILD: %v", err)
	}
}

func TestExpandAndKeyValues(t *testing.T) {
	vars := map[string]string{"A": "1", "EMPTY": ""}
	for in, want := range map[string]string{
		"$A": "1", "${A}x": "1x", "${B:-def}": "def", "${EMPTY:-d}": "d", "${A:+alt}": "alt", "${B:+alt}": "",
		`\$A`: "$A", "a$": "a$", "$1": "$1", "$A$A": "11",
	} {
		if got, err := expand(in, vars); err != nil || got != want {
			t.Errorf("expand(%q) = %q %v, want %q", in, got, err, want)
		}
	}
	kv, err := keyValues(`A=1 B="two words" C='x y'`)
	if err != nil || len(kv) != 3 || kv[1][1] != "two words" || kv[2][1] != "x y" {
		t.Errorf("%v %v", kv, err)
	}
	if kv, _ := keyValues("LEGACY some value"); kv[0][0] != "LEGACY" || kv[0][1] != "some value" {
		t.Errorf("legacy: %v", kv)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("FROM a\nRUN echo $A \\\n b\nENV A=\"1\"\nCMD [\"x\"]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ins, err := Parse("f", b)
		if err != nil {
			return
		}
		for _, in := range ins {
			if in.Line < 1 || !supported[in.Cmd] {
				t.Fatalf("bad instruction %+v", in)
			}
			expand(in.Args, map[string]string{})
			keyValues(in.Args)
		}
	})
}
