package backendtest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/egress"
	"github.com/airlock-dev/airlock/internal/testutil/realserver"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// GitThroughRules runs real git inside a sandbox against git's own
// smart-HTTP server (git http-backend behind TLS, as git.test) through the
// egress proxy's git preset: clone works; a push is allowed where the
// preset names the repository and refused elsewhere, and the host's
// repositories show it. The proof comes first: while the preset allows
// pushes to evil/*, a push to evil/repo.git lands;
// then the preset names acme/* instead (a live change) and the next push to
// evil is refused while acme's lands. pol is the backend's test policy;
// create makes the sandbox from the spec.
func GitThroughRules(t *testing.T, pol *policy.Policy, create func(sandbox.Spec) sandbox.Sandbox) {
	t.Helper()
	g := realserver.StartGit(t, nil)
	preset := func(push string) policy.Network {
		return policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{"127.0.0.1/32:443"},
			Git: &policy.GitRules{Fetch: []string{"git.test"}, Push: []string{push}}}
	}
	pol.Network = preset("git.test/evil/*")
	loopback := netip.MustParseAddr("127.0.0.1")
	id := fmt.Sprintf("git-%s", strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())))
	if len(id) > 40 {
		id = id[:40]
	}
	px, err := egress.New(egress.Config{
		SandboxID: id, Network: pol.Network, RootCAs: g.CA.Pool,
		Resolver: egress.StaticResolver{"git.test": {loopback}},
		// git.test:443 is the test's server on its own port.
		Dial: func(ctx context.Context, network string, ap netip.AddrPort) (net.Conn, error) {
			if ap != netip.AddrPortFrom(loopback, 443) {
				return nil, fmt.Errorf("the test dials only git.test:443, not %v", ap)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, netip.AddrPortFrom(loopback, g.Port).String())
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	spec := sandbox.Spec{ID: id, Policy: pol, Env: map[string]string{"HOME": "/tmp", "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}}
	bundle, _ := egress.SystemBundle()
	px.Attach(&spec, bundle)
	sb := create(spec)
	run := func(script string) string {
		t.Helper()
		_, out := Sh(t, sb, script, 2*time.Minute)
		return strings.TrimSpace(out)
	}
	commit := `echo $RANDOM$RANDOM >> new && git add new && git -c user.name=t -c user.email=t@t commit -q -m c`
	for _, repo := range []string{"acme", "evil"} {
		out := run(fmt.Sprintf(`cd /tmp && git clone -q https://git.test/%s/repo.git %s && cd %s && %s && echo cloned`, repo, repo, repo, commit))
		if !strings.HasSuffix(out, "cloned") {
			t.Fatalf("git clone %s inside: %s", repo, out)
		}
	}
	push := func(repo string) string {
		return run(fmt.Sprintf(`cd /tmp/%s && git push -q origin main; echo "exit=$?"`, repo))
	}
	if out := push("evil"); !strings.HasSuffix(out, "exit=0") || g.Head(t, "evil/repo.git") != run("cd /tmp/evil && git rev-parse HEAD") {
		t.Fatalf("the proof: a push to evil while the preset allows git.test/evil/* did not land: %s", out)
	}
	if err := px.SetNetwork(preset("git.test/acme/*")); err != nil {
		t.Fatal(err)
	}
	run("cd /tmp/evil && " + commit)
	before := g.Head(t, "evil/repo.git")
	if out := push("evil"); strings.HasSuffix(out, "exit=0") {
		t.Errorf("push to evil under push: [git.test/acme/*] passed: %s", out)
	}
	if g.Head(t, "evil/repo.git") != before {
		t.Error("evil/repo.git changed")
	}
	if out := push("acme"); !strings.HasSuffix(out, "exit=0") {
		t.Errorf("push to acme inside: %s", out)
	}
	if g.Head(t, "acme/repo.git") != run("cd /tmp/acme && git rev-parse HEAD") {
		t.Error("acme/repo.git did not get the push")
	}
}
