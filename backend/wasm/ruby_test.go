package wasm

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/sandbox"
)

// requireRuby needs the ruby asset (`make wasm-assets`; CI fetches it in
// `make deps`, so there this fails instead of skipping).
func requireRuby(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(repoAssetDir(), "ruby.wasm")); err != nil {
		testutil.Skip(t, "ruby.wasm not installed: run `make wasm-assets`")
	}
}

func TestRuby(t *testing.T) {
	requireRuby(t)
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "script.rb"), []byte("require 'json'\nrequire_relative 'lib/helper'\nputs JSON.generate(ARGV)\nputs __FILE__ == $0\nFile.write('out.txt', HELPER)\n"), 0o644)
	os.Mkdir(filepath.Join(ws, "lib"), 0o755)
	os.WriteFile(filepath.Join(ws, "lib", "helper.rb"), []byte("HELPER = 'written by ruby'\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "bad.rb"), []byte("def (\n"), 0o644)
	sb := newSandbox(t, testPolicy(ws))
	for _, tc := range []struct {
		name   string
		args   []string
		stdin  string
		code   int
		stdout string
		stderr string
	}{
		{"one-liner", []string{"ruby", "-e", "puts 1+1"}, "", 0, "2\n", ""},
		{"argv", []string{"ruby", "-e", "p ARGV, $0", "a", "-b"}, "", 0, "[\"a\", \"-b\"]\n\"-e\"\n", ""},
		{"exit code", []string{"ruby", "-e", "exit 3"}, "", 3, "", ""},
		{"exception", []string{"ruby", "-e", "raise 'boom'"}, "", 1, "", "boom (RuntimeError)"},
		{"two -e", []string{"ruby", "-we", "x = 1", "-e", "puts x"}, "", 0, "1\n", ""},
		{"stdin program", []string{"ruby"}, "puts 6*7\n", 0, "42\n", ""},
		{"stdin data", []string{"ruby", "-e", "puts $stdin.read.upcase"}, "hi\n", 0, "HI\n", ""},
		{"script", []string{"ruby", "script.rb", "x", "y"}, "", 0, "[\"x\",\"y\"]\ntrue\n", ""},
		{"syntax error", []string{"ruby", "bad.rb"}, "", 1, "", "bad.rb"},
		{"no network", []string{"ruby", "-e", "require 'socket'; TCPSocket.new('127.0.0.1', 80)"}, "", 1, "", "Error"},
		{"outside preopens", []string{"ruby", "-e", "File.read('/etc/passwd')"}, "", 1, "", "No such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := sandbox.ExecRequest{Args: tc.args}
			if tc.stdin != "" {
				req.Stdin = strings.NewReader(tc.stdin)
			}
			r := run(t, sb, req)
			if r.status.Code != tc.code || r.stdout != tc.stdout || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("%v: status %+v\nstdout %q (want %q)\nstderr %q (want it to contain %q)",
					tc.args, r.status, r.stdout, tc.stdout, r.stderr, tc.stderr)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(ws, "out.txt")); string(b) != "written by ruby" {
		t.Errorf("ruby's write in the workspace: %q %v", b, err)
	}
}

func TestParseRubyArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want rubyCommand
	}{
		{nil, rubyCommand{mode: rubyFromStdin}},
		{[]string{"-e", "p 1"}, rubyCommand{mode: rubyFromEval, code: "p 1", argv: []string{}}},
		{[]string{"-ep 1", "x"}, rubyCommand{mode: rubyFromEval, code: "p 1", argv: []string{"x"}}},
		{[]string{"-w", "-e", "a", "-e", "b", "--", "-x"}, rubyCommand{options: []string{"-w"}, mode: rubyFromEval, code: "a\nb", argv: []string{"-x"}}},
		{[]string{"-we", "a"}, rubyCommand{options: []string{"-w"}, mode: rubyFromEval, code: "a", argv: []string{}}},
		{[]string{"-r", "json", "-Ilib", "s.rb", "-e"}, rubyCommand{options: []string{"-rjson", "-Ilib"}, mode: rubyFromScript, code: "s.rb", argv: []string{"-e"}}},
		{[]string{"--encoding", "UTF-8", "--disable=gems", "s.rb"}, rubyCommand{options: []string{"--encoding", "UTF-8", "--disable=gems"}, mode: rubyFromScript, code: "s.rb", argv: []string{}}},
		{[]string{"-W2", "-0777", "-"}, rubyCommand{options: []string{"-W2", "-0777"}, mode: rubyFromStdin, argv: []string{}}},
		{[]string{"-v"}, rubyCommand{options: []string{"-v"}, mode: rubyNoProgram}},
		{[]string{"--version"}, rubyCommand{options: []string{"--version"}, mode: rubyNoProgram}},
		{[]string{"-v", "-e", "1"}, rubyCommand{options: []string{"-v"}, mode: rubyFromEval, code: "1", argv: []string{}}},
		{[]string{"-e"}, rubyCommand{mode: rubyFromEval, code: "", argv: []string{}}},
	} {
		got := parseRubyArgs(tc.args)
		if got.argv == nil && tc.want.argv != nil && len(tc.want.argv) == 0 {
			got.argv = []string{}
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseRubyArgs(%q) = %+v, want %+v", tc.args, got, tc.want)
		}
	}
}

// hexLiteral matches the bootstrap's hex-encoded strings.
var hexLiteral = regexp.MustCompile(`\['[0-9a-f]*'\]`)

// FuzzParseRubyArgs: any command line parses, and no caller text reaches
// the bootstrap except hex-encoded.
func FuzzParseRubyArgs(f *testing.F) {
	f.Add("-e\x00puts 1\x00a")
	f.Add("-we\x00x'; system('id')\x00--\x00-x")
	f.Add("script.rb\x00'\x00\"")
	f.Fuzz(func(t *testing.T, joined string) {
		args := strings.Split(joined, "\x00")
		c := parseRubyArgs(args)
		init := c.initArgs("ruby")
		if init[0] != "ruby" || init[1] != "--disable-gems" {
			t.Fatalf("init args %q", init)
		}
		// With the hex literals taken out, the bootstrap must not depend
		// on the caller's text at all: the same for another program and
		// other arguments (a leak shows as a difference, whatever the
		// bootstrap's own words happen to contain).
		boot := hexLiteral.ReplaceAllString(c.bootstrap("/w"), "")
		other := c
		other.code = "other-program"
		other.argv = make([]string, len(c.argv))
		for i := range other.argv {
			other.argv[i] = "arg"
		}
		if c.code != "" && boot != hexLiteral.ReplaceAllString(other.bootstrap("/w"), "") {
			t.Fatalf("program text %q or its arguments appear outside a hex literal in the bootstrap:\n%s", c.code, boot)
		}
	})
}
