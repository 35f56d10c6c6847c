package wasm

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/tetratelabs/wazero/api"
)

// CRuby's npm build (ruby+stdlib.wasm of @ruby/3.4-wasm-wasi) is a reactor
// made for JavaScript hosts: it has no _start, only _initialize and a
// wit-bindgen API. A command line is run as: ruby-init with the user's
// options (so ruby itself sets up $0, ARGV, -r, -I, encodings), then one
// rb-eval-string-protect of a bootstrap that runs the program (the -e code,
// the script, or stdin) and ends the module with exit!(status), which is
// WASI proc_exit. Differences from a native ruby: at_exit handlers do not
// run, and the -n/-p/-a loops are not applied. RubyGems is off unless the
// command line enables it (it costs about a second per start).
const (
	rubyInitExport = "ruby-init: func(args: list<string>) -> ()"
	rubyEvalExport = "rb-eval-string-protect: func(str: string) -> tuple<handle<rb-abi-value>, s32>"
)

// rubyMode is where the program text comes from.
type rubyMode int

const (
	rubyFromStdin rubyMode = iota
	rubyFromEval           // -e
	rubyFromScript
	rubyNoProgram // ruby -v / --version alone
)

// rubyCommand is a parsed ruby command line.
type rubyCommand struct {
	options []string // interpreter options, without -e
	mode    rubyMode
	code    string   // -e code (lines joined) or the script path
	argv    []string // ARGV
}

// Options of ruby that take the next argument when nothing is attached.
const rubySeparateArg = "eIrCE"

// Options whose argument can only be attached (-0777, -Fsep, -i.bak, -W2, -xdir).
const rubyAttachedArg = "0FiWxKT"

// parseRubyArgs splits ruby's command line (without argv[0]) the way ruby
// reads it: options until the first non-option or "--"; -e may repeat.
func parseRubyArgs(args []string) rubyCommand {
	var c rubyCommand
	var codes []string
	version := false
	i := 0
loop:
	for ; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			i++
			break loop
		case a == "-" || !strings.HasPrefix(a, "-"):
			break loop
		case strings.HasPrefix(a, "--"):
			name, _, hasValue := strings.Cut(a[2:], "=")
			if name == "version" {
				version = true
			}
			c.options = append(c.options, a)
			if !hasValue && (name == "encoding" || name == "external-encoding" || name == "internal-encoding") && i+1 < len(args) {
				i++
				c.options = append(c.options, args[i])
			}
		default:
			kept := "-"
			cluster := a[1:]
			for j := 0; j < len(cluster); j++ {
				ch := cluster[j]
				if strings.IndexByte(rubySeparateArg, ch) >= 0 {
					val := cluster[j+1:]
					if val == "" && i+1 < len(args) {
						i++
						val = args[i]
					}
					if ch == 'e' {
						codes = append(codes, val)
					} else {
						if kept != "-" {
							c.options = append(c.options, kept)
							kept = "-"
						}
						c.options = append(c.options, "-"+string(ch)+val)
					}
					break
				}
				kept += string(ch)
				if ch == 'v' {
					version = true
				}
				if strings.IndexByte(rubyAttachedArg, ch) >= 0 {
					kept += cluster[j+1:]
					break
				}
			}
			if kept != "-" {
				c.options = append(c.options, kept)
			}
		}
	}
	rest := args[i:]
	switch {
	case len(codes) > 0:
		c.mode, c.code, c.argv = rubyFromEval, strings.Join(codes, "\n"), rest
	case len(rest) > 0 && rest[0] != "-":
		c.mode, c.code, c.argv = rubyFromScript, rest[0], rest[1:]
	case len(rest) > 0: // "-": program from stdin
		c.mode, c.argv = rubyFromStdin, rest[1:]
	case version:
		c.mode = rubyNoProgram
	default:
		c.mode = rubyFromStdin
	}
	return c
}

// initArgs is the argv given to ruby-init: the options, a placeholder
// program (so ruby neither runs nor reads anything), then ARGV.
func (c rubyCommand) initArgs(argv0 string) []string {
	out := append([]string{argv0, "--disable-gems"}, c.options...)
	out = append(out, "-e", "nil", "--")
	return append(out, c.argv...)
}

// bootstrap is the Ruby code that runs the program and exits. Program text
// and paths travel hex-encoded, so nothing the caller passes is parsed as
// part of the bootstrap.
func (c rubyCommand) bootstrap(dir string) string {
	lit := func(s string) string {
		return "['" + hex.EncodeToString([]byte(s)) + "'].pack('H*').force_encoding(Encoding::UTF_8)"
	}
	var run string
	switch c.mode {
	case rubyFromEval:
		run = "TOPLEVEL_BINDING.eval(" + lit(c.code) + ", '-e', 1)"
	case rubyFromScript:
		run = "$0 = " + lit(c.code) + "; TOPLEVEL_BINDING.eval(File.read($0), $0, 1)"
	case rubyFromStdin:
		run = "TOPLEVEL_BINDING.eval($stdin.read, '-', 1)"
	case rubyNoProgram:
		run = "nil"
	}
	return `__airlock_status = 0
begin
  Dir.chdir(` + lit(dir) + `)
  ` + run + `
rescue SystemExit => e
  __airlock_status = e.status
rescue Exception => e
  $stderr.write(e.full_message(highlight: false))
  __airlock_status = 1
end
begin; $stdout.flush; $stderr.flush; rescue Exception; end
exit!(__airlock_status)
`
}

// runRuby runs the command line args (args[0] is the command name) in an
// initialized ruby module. It returns the module's exit as an error, like
// a WASI command's _start. dir is the working directory (wasi-libc starts
// in "/").
func runRuby(ctx context.Context, mod api.Module, args []string, dir string) error {
	cmd := parseRubyArgs(args[1:])
	realloc := mod.ExportedFunction("cabi_realloc")
	mem := mod.Memory()
	alloc := func(size, align uint32) (uint32, error) {
		res, err := realloc.Call(ctx, 0, 0, uint64(align), uint64(size))
		if err != nil {
			return 0, err
		}
		return uint32(res[0]), nil
	}
	// str places s, NUL-terminated as the ruby build expects, in guest memory.
	str := func(s string) (uint32, error) {
		p, err := alloc(uint32(len(s)+1), 1)
		if err != nil {
			return 0, err
		}
		if !mem.Write(p, append([]byte(s), 0)) {
			return 0, errors.New("ruby: argument outside guest memory")
		}
		return p, nil
	}
	init := cmd.initArgs(args[0])
	list, err := alloc(uint32(8*len(init)), 4)
	if err != nil {
		return err
	}
	for i, a := range init {
		p, err := str(a)
		if err != nil {
			return err
		}
		if !mem.WriteUint32Le(list+uint32(8*i), p) || !mem.WriteUint32Le(list+uint32(8*i)+4, uint32(len(a))) {
			return errors.New("ruby: argument list outside guest memory")
		}
	}
	if _, err := mod.ExportedFunction(rubyInitExport).Call(ctx, uint64(list), uint64(len(init))); err != nil {
		return err
	}
	boot := cmd.bootstrap(dir)
	p, err := str(boot)
	if err != nil {
		return err
	}
	if _, err := mod.ExportedFunction(rubyEvalExport).Call(ctx, uint64(p), uint64(len(boot))); err != nil {
		return err
	}
	return fmt.Errorf("ruby: bootstrap returned without exiting")
}
