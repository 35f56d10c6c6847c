package policy_test

import (
	"fmt"

	"github.com/airlock-dev/airlock/policy"
)

func ExampleParse() {
	_, err := policy.Parse("policy.yaml", []byte(`version: 1
filesystem:
  read_only:
    - /usr
    - etc
limits:
  memory: 2XB
`))
	fmt.Println(err)
	// Output:
	// policy.yaml:5: filesystem.read_only[1]: "etc" must be an absolute path
	// policy.yaml:7: limits.memory: bad size "2XB": unknown unit "XB" (use k, M, G, T or Ki, Mi, Gi, Ti)
}

func ExamplePolicy_Resolve() {
	p, err := policy.Parse("policy.yaml", []byte(`version: 1
profile: coding-agent
filesystem:
  read_write: [~/.cache/go-build]
network:
  allow: [proxy.golang.org]
limits:
  timeout: unlimited
`))
	if err != nil {
		panic(err)
	}
	r, err := p.Resolve(policy.ResolveEnv{
		Cwd: "/home/alice/src/app", Home: "/home/alice", UID: 1000, GID: 1000,
		Exists: func(string) bool { return true },
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Filesystem.Workspace, r.Process.Workdir)
	fmt.Println(r.Filesystem.ReadWrite)
	fmt.Println(r.Network.Mode, r.Network.Allow[len(r.Network.Allow)-1])
	fmt.Println(r.Limits.Memory, r.Limits.Timeout)
	fmt.Println(r.Environ([]string{"PATH=/usr/bin", "ANTHROPIC_API_KEY=sk-...", "ANTHROPIC_MODEL=opus", "HOME=/home/alice"}))
	// Output:
	// /home/alice/src/app /home/alice/src/app
	// [/home/alice/.claude /home/alice/.claude.json /home/alice/.config/claude /home/alice/.codex /home/alice/.cache/go-build]
	// allowlist proxy.golang.org
	// 4Gi 0s
	// [ANTHROPIC_MODEL=opus HOME=/home/alice PATH=/usr/bin]
}
