package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/airlock-dev/airlock/policy"
)

func init() {
	register(command{name: "policy", short: "check policy files, show resolved policies and built-in profiles", run: runPolicy})
}

const policyUsage = `usage:
  airlock policy check FILE...              validate policy files ("FILE: ok" or the errors; - is stdin)
  airlock policy show [--profile NAME] [--unresolved] [--env] [FILE]
                                            print the resolved policy as YAML (--env: the
                                            environment a sandbox would start with)
  airlock policy profiles                   list the built-in profiles
`

func runPolicy(args []string) int {
	return dispatch("policy", policyUsage, []subcommand{
		{[]string{"check"}, runPolicyCheck},
		{[]string{"show"}, runPolicyShow},
		{[]string{"profiles"}, runPolicyProfiles},
	}, args)
}

// runPolicyCheck loads and resolves each file as `airlock run` would, in
// this directory, and prints "FILE: ok" or its errors (compiler style,
// "FILE:LINE: FIELD: MESSAGE", on stderr).
func runPolicyCheck(args []string) int {
	fs := newFlagSet("policy check")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprint(os.Stderr, "airlock policy check: no files given\n"+policyUsage)
		return exitAirlock
	}
	env, err := policy.HostEnv()
	if err != nil {
		return fail("policy check", err)
	}
	code := 0
	for _, file := range fs.Args() {
		p, err := loadPolicyArg(file)
		if err == nil {
			_, err = p.Resolve(env)
		}
		if err != nil {
			printPolicyError(file, err)
			code = exitAirlock
			continue
		}
		fmt.Printf("%s: ok\n", file)
	}
	return code
}

// loadPolicyArg loads a policy file, or standard input for "-".
func loadPolicyArg(file string) (*policy.Policy, error) {
	if file != "-" {
		return policy.LoadFile(file)
	}
	data, err := io.ReadAll(io.LimitReader(os.Stdin, policy.MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read standard input: %w", err)
	}
	return policy.Parse("-", data)
}

// printPolicyError prints one line per problem, each starting with the
// file name (errors about fields the file did not set carry none).
func printPolicyError(file string, err error) {
	for _, line := range strings.Split(err.Error(), "\n") {
		if !strings.HasPrefix(line, file+":") {
			line = file + ": " + line
		}
		fmt.Fprintln(os.Stderr, line)
	}
}

func runPolicyShow(args []string) int {
	fs := newFlagSet("policy show")
	profile := fs.String("profile", "", "built-in profile to start from (overrides the file's profile:)")
	unresolved := fs.Bool("unresolved", false, "show the merged policy before Resolve (~ not expanded, no defaults)")
	showEnv := fs.Bool("env", false, "print the sandbox's base environment from this shell's instead (K=V lines)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 1 {
		fmt.Fprintf(os.Stderr, "airlock policy show: one file at most, got %d\n", fs.NArg())
		return exitAirlock
	}
	var (
		p   *policy.Policy
		err error
	)
	file := fs.Arg(0)
	if file != "" {
		var raw *policy.Policy
		if raw, err = policy.LoadFileRaw(file); err == nil {
			p, err = policy.WithProfile(raw, *profile)
		}
	} else {
		name := *profile
		if name == "" {
			name = "default"
		}
		p, err = policy.Profile(name)
	}
	if err == nil && !*unresolved {
		var env policy.ResolveEnv
		if env, err = policy.HostEnv(); err == nil {
			p, err = p.Resolve(env)
		}
	}
	if err != nil {
		if file != "" && errors.Is(err, policy.ErrInvalid) {
			printPolicyError(file, err)
			return exitAirlock
		}
		return fail("policy show", err)
	}
	if *showEnv {
		for _, kv := range p.Environ(os.Environ()) {
			fmt.Println(kv)
		}
		return 0
	}
	out, err := p.YAML()
	if err != nil {
		return fail("policy show", err)
	}
	os.Stdout.Write(out)
	return 0
}

func runPolicyProfiles(args []string) int {
	fs := newFlagSet("policy profiles")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	for _, n := range policy.Profiles() {
		fmt.Printf("%-14s %s\n", n, policy.ProfileDoc(n))
	}
	return 0
}
