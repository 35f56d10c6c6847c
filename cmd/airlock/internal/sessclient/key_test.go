package sessclient

import (
	"flag"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// A FlagSet like main's run one, built from RunFlags: ParseFlags must
// split arguments exactly as package flag does.
func flagSetFromTable() *flag.FlagSet {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	for name, isBool := range RunFlags {
		if isBool {
			fs.Bool(name, false, "")
		} else {
			fs.String(name, "", "")
		}
	}
	return fs
}

func TestParseFlagsSplitsAsFlagDoes(t *testing.T) {
	cases := [][]string{
		{"--session", "s", "--", "true"},
		{"-session=s", "--json", "true", "--ro", "x"},
		{"--session", "s", "--policy", "--", "cmd"}, // "--" as a value
		{"--session", "s", "--verbose=false", "--rw", "a", "--rw", "b", "--", "ls", "-l"},
		{"--session", "s", "-", "x"},
		{"--session", "s", "cmd", "--", "x"},
		{"--session", "s"},
		{"--session", "s", "--", "--end"},
	}
	for _, args := range cases {
		fs := flagSetFromTable()
		if err := fs.Parse(args); err != nil {
			t.Fatalf("%q: flag: %v", args, err)
		}
		_, rest, ok := ParseFlags(args)
		if !ok {
			t.Fatalf("%q: ParseFlags refused what flag takes", args)
		}
		if !reflect.DeepEqual(rest, fs.Args()) && (len(rest) != 0 || len(fs.Args()) != 0) {
			t.Errorf("%q: command %q, flag says %q", args, rest, fs.Args())
		}
	}
	for _, args := range [][]string{
		{"--nosuch", "x", "--", "true"}, {"--policy"}, {"--json=maybe", "--", "true"},
		{"---session", "s"}, {"-h"}, {"--help"}, {"-=x"},
	} {
		if _, _, ok := ParseFlags(args); ok {
			t.Errorf("%q: ParseFlags took what main must handle (refuse or explain)", args)
		}
	}
}

// The key ignores how the session is reached and the order of flags, and
// changes with any flag that shapes the sandbox.
func TestKey(t *testing.T) {
	key := func(args ...string) string {
		f, _, ok := ParseFlags(args)
		if !ok {
			t.Fatalf("%q refused", args)
		}
		return Key(f)
	}
	base := key("--session", "s", "--ro", "/a", "--network", "none")
	if got := key("--network=none", "--json", "--session", "s", "--verbose", "--ro", "/a"); got != base {
		t.Errorf("order or reach flags changed the key")
	}
	for _, other := range [][]string{
		{"--session", "t", "--ro", "/a", "--network", "none"},
		{"--session", "s", "--ro", "/b", "--network", "none"},
		{"--session", "s", "--ro", "/a", "--network", "open"},
		{"--session", "s", "--ro", "/a", "--network", "none", "--no-cache"},
	} {
		if key(other...) == base {
			t.Errorf("%q has the key of the base", other)
		}
	}
}

// The package must initialise before the binary's heavy packages: it may
// import only these (standard, initialised among the first, or without
// init work). Adding one here needs a look at GODEBUG=inittrace=1.
func TestSessclientImports(t *testing.T) {
	allowed := map[string]bool{
		"errors": true, "hash/fnv": true, "os": true, "os/signal": true, "sort": true,
		"strconv": true, "syscall": true, "unicode/utf8": true, "unsafe": true,
	}
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range strings.Fields(string(out)) {
		if !allowed[imp] {
			t.Errorf("sessclient imports %s: its init would wait for the packages sorted before it", imp)
		}
	}
}
