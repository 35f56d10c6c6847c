package policy

import "testing"

// TestRequestRulePrograms: programs are absolute clean paths or bare
// names; a bare name matches the file name of a verified path; a rule
// naming programs never matches an unverified ("") program; a bound naming
// programs covers only rules naming some of them.
func TestRequestRulePrograms(t *testing.T) {
	for _, bad := range []string{"", ".", "..", "bin/git", "/usr/bin/../bin/git", "/usr/bin/", "/", "git\x00"} {
		if _, err := compileRule(RequestRule{Host: "x.test", Programs: []string{bad}}); err == nil {
			t.Errorf("program %q accepted", bad)
		}
	}
	c, err := compileRule(RequestRule{Host: "x.test", Programs: []string{"/usr/lib/git-core/git-remote-https", "node"}})
	if err != nil {
		t.Fatal(err)
	}
	for prog, want := range map[string]bool{
		"/usr/lib/git-core/git-remote-https": true, "/usr/bin/node": true, "/opt/node/bin/node": true,
		"/usr/bin/git-remote-https": false, "/usr/bin/nodejs": false, "/usr/bin/curl": false, "": false,
	} {
		if got := c.MatchProgram(prog); got != want {
			t.Errorf("MatchProgram(%q) = %v, want %v", prog, got, want)
		}
	}
	if any, _ := compileRule(RequestRule{Host: "x.test"}); !any.MatchProgram("") {
		t.Error("a rule without programs must match any program, verified or not")
	}
	bound, _ := compileRule(RequestRule{Host: "x.test", Programs: []string{"node"}})
	for _, tc := range []struct {
		progs []string
		want  bool
	}{{[]string{"node"}, true}, {nil, false}, {[]string{"node", "curl"}, false}} {
		r, _ := compileRule(RequestRule{Host: "x.test", Programs: tc.progs})
		if got := bound.Covers(r); got != tc.want {
			t.Errorf("bound node covers %v: %v, want %v", tc.progs, got, tc.want)
		}
	}
}
