// Command attacks is Airlock's red-team payload: one static binary holding
// every escape attempt of test/escape, selected by argv[1] with key=value
// parameters. It is run unconfined on the test host first (to prove the
// attack works) and then inside every backend. It must never do anything
// irreversible on the host: targets are bait planted by the runner, host
// settings are written back with their own value, and exhaustion attacks are
// capped.
//
// Exit codes: 0 escaped (the forbidden thing happened, evidence printed),
// 1 blocked (the error seen printed), 2 error in the attack itself,
// 3 not applicable here.
package main

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

// Exit codes shared with the runner.
const (
	exitEscaped = 0
	exitBlocked = 1
	exitError   = 2
	exitNA      = 3
)

// params are the attack's key=value arguments.
type params map[string]string

func (p params) get(k string) string {
	v, ok := p[k]
	if !ok {
		fail("missing parameter %q", k)
	}
	return v
}

// attack is one escape attempt; it ends the process through escaped,
// blocked, fail or notApplicable.
type attack func(p params)

var attacks = map[string]attack{}

func register(name string, a attack) {
	if _, dup := attacks[name]; dup {
		panic("duplicate attack " + name)
	}
	attacks[name] = a
}

func main() {
	if len(os.Args) < 2 {
		names := make([]string, 0, len(attacks))
		for n := range attacks {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Println(strings.Join(names, "\n"))
		os.Exit(exitError)
	}
	a, ok := attacks[os.Args[1]]
	if !ok {
		fail("unknown attack %q", os.Args[1])
	}
	p := params{}
	for _, kv := range os.Args[2:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			fail("bad parameter %q", kv)
		}
		p[k] = v
	}
	a(p)
	fail("attack %s returned without a verdict", os.Args[1])
}

func escaped(format string, args ...any) {
	fmt.Printf("ESCAPED: "+format+"\n", args...)
	os.Exit(exitEscaped)
}

func blocked(format string, args ...any) {
	fmt.Printf("BLOCKED: "+format+"\n", args...)
	os.Exit(exitBlocked)
}

func fail(format string, args ...any) {
	fmt.Printf("ERROR: "+format+"\n", args...)
	os.Exit(exitError)
}

func notApplicable(format string, args ...any) {
	fmt.Printf("N/A: "+format+"\n", args...)
	os.Exit(exitNA)
}

// note prints a line of evidence without ending the attack.
func note(format string, args ...any) {
	fmt.Printf(format+"\n", args...)
}

// short returns at most 80 bytes of b for evidence lines.
func short(b []byte) string {
	if len(b) > 80 {
		b = b[:80]
	}
	return fmt.Sprintf("%q", b)
}

func init() {
	register("ping", func(params) { fmt.Println("pong"); os.Exit(exitEscaped) })
}
