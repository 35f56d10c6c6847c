package policy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestParseErrors feeds bad policies and checks that the error is
// ErrInvalid and names the file, the line and the field.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // each must appear in the error text
	}{
		{"bad yaml", "version: 1\nfilesystem:\n  read_only: [/usr\n", []string{"p.yaml:2: yaml: did not find expected ',' or ']'"}},
		{"tab indentation", "version: 1\nfilesystem:\n\tread_only: []\n", []string{"p.yaml:3: yaml: "}},
		{"empty", "", []string{"p.yaml:1: version: empty policy"}},
		{"only comments", "# nothing\n", []string{"p.yaml:1: version: empty policy"}},
		{"not a mapping", "- a\n- b\n", []string{"p.yaml:1: want a mapping, got a list"}},
		{"missing version", "network:\n  mode: none\n", []string{"p.yaml:1: version: required"}},
		{"wrong version", "version: 2\n", []string{"p.yaml:1: version: unsupported version 2"}},
		{"version string", "version: one\n", []string{`p.yaml:1: version: want an integer, got "one"`}},
		{"unknown top field", "version: 1\nnetwrk: {}\n", []string{`p.yaml:2: netwrk: unknown field "netwrk" (known: version, profile,`}},
		{"unknown nested field", "version: 1\nfilesystem:\n  read_only: [/usr]\n  readwrite: [/x]\n", []string{`p.yaml:4: filesystem.readwrite: unknown field "readwrite"`}},
		{"unknown field in secret", "version: 1\nsecrets:\n  - name: A\n    from_env: A\n    hosts: [x.com]\n    value: s3cret\n", []string{`p.yaml:6: secrets[0].value: unknown field "value"`}},
		{"field set twice", "version: 1\nbackend: native\nbackend: gvisor\n", []string{"p.yaml:3: backend: set twice"}},
		{"env key twice", "version: 1\nprocess:\n  env:\n    A: x\n    A: y\n", []string{"p.yaml:5: process.env.A: set twice"}},
		{"relative read_only", "version: 1\nfilesystem:\n  read_only:\n    - /usr\n    - /opt\n    - etc\n", []string{`p.yaml:6: filesystem.read_only[2]: "etc" must be an absolute path`}},
		{"relative read_write", "version: 1\nfilesystem:\n  read_write: [data]\n", []string{`p.yaml:3: filesystem.read_write[0]: "data" must be an absolute path`}},
		{"relative deny", "version: 1\nfilesystem:\n  deny: [./secret]\n", []string{`p.yaml:3: filesystem.deny[0]: "./secret" must be an absolute path`}},
		{"relative tmpfs", "version: 1\nfilesystem:\n  tmpfs: [cache]\n", []string{`p.yaml:3: filesystem.tmpfs[0]: "cache" must be an absolute path`}},
		{"relative rootfs", "version: 1\nfilesystem:\n  rootfs: rootfs\n", []string{`p.yaml:3: filesystem.rootfs: "rootfs" must be an absolute path`}},
		{"relative workdir", "version: 1\nprocess:\n  workdir: src\n", []string{`p.yaml:3: process.workdir: "src" must be an absolute path`}},
		{"tilde user", "version: 1\nfilesystem:\n  read_only: [~bob/x]\n", []string{`p.yaml:3: filesystem.read_only[0]: "~bob/x": only ~ and ~/... are expanded`}},
		{"other variable", "version: 1\nfilesystem:\n  read_only: [$USER/x]\n", []string{`p.yaml:3: filesystem.read_only[0]: "$USER/x": only $HOME is expanded`}},
		{"rw root", "version: 1\nfilesystem:\n  read_write: [/]\n", []string{"p.yaml:3: filesystem.read_write[0]: refusing to make / writable"}},
		{"workspace root", "version: 1\nfilesystem:\n  workspace: /\n", []string{"p.yaml:3: filesystem.workspace: refusing to use / as the workspace"}},
		{"list as string", "version: 1\nfilesystem:\n  read_only: /usr\n", []string{`p.yaml:3: filesystem.read_only: want a list, got "/usr"`}},
		{"mapping as string", "version: 1\nfilesystem: /usr\n", []string{`p.yaml:2: filesystem: want a mapping, got "/usr"`}},
		{"string as list", "version: 1\nbackend: [native]\n", []string{"p.yaml:2: backend: want a string, got a list"}},
		{"unknown backend", "version: 1\nbackend: firecracker\n", []string{`p.yaml:2: backend: unknown value "firecracker" (known: auto, native,`}},
		{"unknown isolation", "version: 1\nisolation: strong\n", []string{`p.yaml:2: isolation: unknown value "strong"`}},
		{"unknown profile", "version: 1\nprofile: yolo\n", []string{`p.yaml:2: profile: unknown profile "yolo" (known: coding-agent, default, strict)`}},
		{"bool as string", "version: 1\nallow_degraded: sure\n", []string{`p.yaml:2: allow_degraded: want true or false, got "sure"`}},
		{"protect_config string", "version: 1\nfilesystem:\n  protect_config: off\n", []string{`p.yaml:3: filesystem.protect_config: want true or false`}},
		{"negative memory", "version: 1\nlimits:\n  memory: -5\n", []string{"p.yaml:3: limits.memory: size must not be negative"}},
		{"negative pids", "version: 1\nlimits:\n  pids: -1\n", []string{"p.yaml:3: limits.pids: must not be negative, got -1"}},
		{"negative open files", "version: 1\nlimits:\n  open_files: -10\n", []string{"p.yaml:3: limits.open_files: must not be negative"}},
		{"negative cpus", "version: 1\nlimits:\n  cpus: -0.5\n", []string{"p.yaml:3: limits.cpus: must not be negative"}},
		{"too many cpus", "version: 1\nlimits:\n  cpus: 5000\n", []string{"p.yaml:3: limits.cpus: 5000 is more than the maximum 1024"}},
		{"tiny cpus", "version: 1\nlimits:\n  cpus: 0.001\n", []string{"p.yaml:3: limits.cpus: 0.001 is below the smallest CPU share"}},
		{"cpus nan", "version: 1\nlimits:\n  cpus: .nan\n", []string{"p.yaml:3: limits.cpus: want a finite number"}},
		{"too many pids", "version: 1\nlimits:\n  pids: 99999999\n", []string{"p.yaml:3: limits.pids: 9.9999999e+07 is more than the maximum"}},
		{"bad size unit", "version: 1\nlimits:\n  memory: 2XB\n", []string{`p.yaml:3: limits.memory: bad size "2XB": unknown unit "XB"`}},
		{"bad size number", "version: 1\nlimits:\n  output_bytes: lots\n", []string{`p.yaml:3: limits.output_bytes: bad size "lots"`}},
		{"size too large", "version: 1\nlimits:\n  disk: 100000Ei\n", []string{`p.yaml:3: limits.disk: bad size "100000Ei": too large`}},
		{"tiny memory", "version: 1\nlimits:\n  memory: 100k\n", []string{"p.yaml:3: limits.memory: 100000 is too small to run anything"}},
		{"size as list", "version: 1\nlimits:\n  memory: [1]\n", []string{"p.yaml:3: limits.memory: want a size"}},
		{"duration without unit", "version: 1\nlimits:\n  timeout: 30\n", []string{"p.yaml:3: limits.timeout: duration 30 needs a unit, e.g. 30s"}},
		{"bad duration", "version: 1\nlimits:\n  timeout: soon\n", []string{`p.yaml:3: limits.timeout: bad duration "soon"`}},
		{"negative duration", "version: 1\nlimits:\n  timeout: -5m\n", []string{`p.yaml:3: limits.timeout: duration must not be negative`}},
		{"bad network mode", "version: 1\nnetwork:\n  mode: some\n", []string{`p.yaml:3: network.mode: unknown value "some" (known: none, allowlist, open)`}},
		{"url in allow", "version: 1\nnetwork:\n  allow:\n    - example.com\n    - https://example.com/x\n", []string{`p.yaml:5: network.allow[1]: "https://example.com/x": want a host name, address or CIDR, not a URL`}},
		{"star in allow", "version: 1\nnetwork:\n  allow: ['*']\n", []string{`p.yaml:3: network.allow[0]: "*": a wildcard is only allowed as a leading "*."`}},
		{"inner wildcard", "version: 1\nnetwork:\n  allow: ['api.*.com']\n", []string{`network.allow[0]: "api.*.com": a wildcard is only allowed`}},
		{"bad port", "version: 1\nnetwork:\n  allow: ['example.com:99999']\n", []string{`p.yaml:3: network.allow[0]: "example.com:99999": bad port "99999"`}},
		{"bad cidr", "version: 1\nnetwork:\n  deny: ['10.0.0.0/33']\n", []string{`p.yaml:3: network.deny[0]: "10.0.0.0/33": bad CIDR`}},
		{"bad label", "version: 1\nnetwork:\n  deny: ['-bad.example.com']\n", []string{`network.deny[0]: "-bad.example.com": label "-bad" starts or ends with '-'`}},
		{"bad ip", "version: 1\nnetwork:\n  deny: ['1.2.3.999']\n", []string{`network.deny[0]: "1.2.3.999": not a valid IP address or host name`}},
		{"secret without name", "version: 1\nsecrets:\n  - from_env: X\n    hosts: [a.com]\n", []string{"p.yaml:3: secrets[0].name: required"}},
		{"secret without source", "version: 1\nsecrets:\n  - name: GH_TOKEN\n    hosts: [api.github.com]\n", []string{"p.yaml:3: secrets[0]: needs one of from_env or from_file"}},
		{"secret two sources", "version: 1\nsecrets:\n  - name: GH_TOKEN\n    from_env: GH_TOKEN\n    from_file: /run/t\n    hosts: [api.github.com]\n", []string{"p.yaml:3: secrets[0]: set only one of from_env and from_file"}},
		{"secret without hosts", "version: 1\nsecrets:\n  - name: GH_TOKEN\n    from_env: GH_TOKEN\n", []string{"p.yaml:3: secrets[0].hosts: required"}},
		{"secret empty hosts", "version: 1\nsecrets:\n  - name: GH_TOKEN\n    from_env: GH_TOKEN\n    hosts: []\n", []string{"p.yaml:5: secrets[0].hosts: required"}},
		{"secret bad env", "version: 1\nsecrets:\n  - name: gh\n    env: 1GH\n    from_env: GH_TOKEN\n    hosts: [api.github.com]\n", []string{`p.yaml:4: secrets[0].env: "1GH" is not a valid variable name`}},
		{"secret bad name as env", "version: 1\nsecrets:\n  - name: github token\n    from_env: GH_TOKEN\n    hosts: [api.github.com]\n", []string{`p.yaml:3: secrets[0].name: "github token" is not a valid variable name`}},
		{"secret relative file", "version: 1\nsecrets:\n  - name: T\n    from_file: token.txt\n    hosts: [a.com]\n", []string{`p.yaml:4: secrets[0].from_file: "token.txt" must be an absolute path`}},
		{"secret to address", "version: 1\nsecrets:\n  - name: T\n    from_env: T\n    hosts: [10.0.0.1]\n", []string{`p.yaml:5: secrets[0].hosts[0]: "10.0.0.1": secrets go to host names`}},
		{"secret twice", "version: 1\nsecrets:\n  - {name: T, from_env: T, hosts: [a.com]}\n  - {name: T, from_env: U, hosts: [b.com]}\n", []string{`p.yaml:4: secrets[1].name: secret "T" defined twice`}},
		{"bad env name", "version: 1\nprocess:\n  env:\n    BAD-NAME: x\n", []string{`p.yaml:4: process.env.BAD-NAME: "BAD-NAME" is not a valid variable name`}},
		{"env value mapping", "version: 1\nprocess:\n  env:\n    A: {b: c}\n", []string{`p.yaml:4: process.env.A: want a string, got a mapping`}},
		{"env_allow star", "version: 1\nprocess:\n  env_allow: ['*']\n", []string{`p.yaml:3: process.env_allow[0]: "*" would pass the whole host environment`}},
		{"env_allow junk", "version: 1\nprocess:\n  env_allow: ['A*B']\n", []string{`p.yaml:3: process.env_allow[0]: "A*B" is not a variable name`}},
		{"uid negative", "version: 1\nprocess:\n  uid: -1\n", []string{"p.yaml:3: process.uid: -1 out of range"}},
		{"gid too big", "version: 1\nprocess:\n  gid: 4294967295\n", []string{"p.yaml:3: process.gid: 4294967295 out of range"}},
		{"uid overflow", "version: 1\nprocess:\n  uid: 99999999999999999999\n", []string{"p.yaml:3: process.uid: want an integer"}},
		{"two documents", "version: 1\n---\nversion: 1\n", []string{"p.yaml:2: yaml: more than one document"}},
		{"merge key", "version: 1\nlimits: &l {pids: 5}\nprocess:\n  <<: *l\n", []string{"p.yaml:4: process.<<: YAML merge keys (<<) are not supported"}},
		{"non-string key", "version: 1\n[a]: b\n", []string{"p.yaml:2: field names must be plain strings"}},
		{"several errors", "version: 1\nbackend: x\nlimits:\n  pids: -1\n", []string{`p.yaml:2: backend: unknown value "x"`, "p.yaml:4: limits.pids: must not be negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse succeeded, want error containing %q", tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
			if n := strings.Count(err.Error(), "\n") + 1; n != len(tt.want) {
				t.Errorf("%d problems reported, want %d:\n%v", n, len(tt.want), err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n  %v\nwant it to contain\n  %s", err, w)
				}
			}
		})
	}
}

func TestParseGood(t *testing.T) {
	p, err := Parse("p.yaml", []byte(`
version: 1
profile: strict
backend: native
filesystem:
  workspace: ~/proj
  read_only: [/data, "$HOME/datasets", "${HOME}/models/"]
  read_write: [~/.cache/pip]
  deny: [/data/private]
  tmpfs: [/var/tmp]
  protect_config: false
network:
  allow: [pypi.org, "*.pythonhosted.org:443", 10.1.0.0/16, "[2001:db8::1]:8443"]
  deny: [169.254.169.254]
process:
  env_allow: [VIRTUAL_ENV, PIP_*]
  env: {PYTHONDONTWRITEBYTECODE: 1, EMPTY: ~}
  workdir: ~/proj/src
  uid: 1000
  gid: 1000
limits:
  memory: 1Gi
  cpus: 1.5
  pids: unlimited
  timeout: 0
  output_bytes: 64MiB
secrets:
  - name: PYPI_TOKEN
    from_file: ~/.pypirc-token
    hosts: [upload.pypi.org]
audit:
  file: audit.jsonl
`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Profile != "strict" || p.Backend != "native" || p.Version != 1 {
		t.Errorf("profile/backend/version = %q %q %d", p.Profile, p.Backend, p.Version)
	}
	strict, _ := Profile("strict")
	wantRO := append(cloneStrings(strict.Filesystem.ReadOnly), "/data", "$HOME/datasets", "${HOME}/models/")
	if !reflect.DeepEqual(p.Filesystem.ReadOnly, wantRO) {
		t.Errorf("read_only = %q, want %q", p.Filesystem.ReadOnly, wantRO)
	}
	if p.Filesystem.Workspace != "~/proj" {
		t.Errorf("workspace = %q (the file's overrides strict's none)", p.Filesystem.Workspace)
	}
	if *p.Filesystem.ProtectConfig {
		t.Error("protect_config: false did not override the profile")
	}
	if p.Limits.Memory != 1<<30 || p.Limits.CPUs != 1.5 || p.Limits.Pids != Unlimited || p.Limits.Timeout != Unlimited || p.Limits.OutputBytes != 64<<20 {
		t.Errorf("limits = %+v", p.Limits)
	}
	if p.Limits.OpenFiles != strict.Limits.OpenFiles {
		t.Errorf("open_files = %d, want the profile's %d", p.Limits.OpenFiles, strict.Limits.OpenFiles)
	}
	if p.Process.Env["PYTHONDONTWRITEBYTECODE"] != "1" || p.Process.Env["EMPTY"] != "" {
		t.Errorf("env = %q", p.Process.Env)
	}
	if *p.Process.UID != 1000 || *p.Process.GID != 1000 {
		t.Errorf("uid/gid = %d/%d", *p.Process.UID, *p.Process.GID)
	}
	if len(p.Secrets) != 1 || p.Secrets[0].FromFile != "~/.pypirc-token" {
		t.Errorf("secrets = %+v", p.Secrets)
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(f, []byte("version: 1\nfilesystem:\n  read_only:\n    - /usr\n    - etc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadFile(f)
	want := f + `:5: filesystem.read_only[1]: "etc" must be an absolute path`
	if err == nil || err.Error() != want {
		t.Fatalf("LoadFile error = %v, want %s", err, want)
	}
	var pe *Error
	if !errors.As(err, &pe) || pe.File != f || pe.Line != 5 || pe.Field != "filesystem.read_only[1]" {
		t.Errorf("Error fields = %+v", pe)
	}

	_, err = LoadFile(filepath.Join(dir, "missing.yaml"))
	if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "missing.yaml: open: no such file") {
		t.Errorf("missing file: %v", err)
	}

	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, make([]byte, MaxFileSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("big file: %v", err)
	}
}

// Aliases may not blow a small file up into a huge amount of work.
func TestParseAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("version: 1\nsecrets:\n  - {name: S0, from_env: S, hosts: &h [")
	for j := 0; j < 400; j++ {
		if j > 0 {
			b.WriteString(", ")
		}
		b.WriteString("a.com")
	}
	b.WriteString("]}\n")
	for i := 1; i < 400; i++ {
		fmt.Fprintf(&b, "  - {name: S%d, from_env: S, hosts: *h}\n", i)
	}
	if b.Len() > 20000 {
		t.Fatalf("test input is %d bytes, want a small file", b.Len())
	}
	_, err := Parse("bomb.yaml", []byte(b.String()))
	if err == nil || !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "too many aliases") {
		t.Errorf("err = %v, want the node budget to trip", err)
	}
}

func TestWithProfileOverride(t *testing.T) {
	raw, err := ParseRaw("p.yaml", []byte("version: 1\nprofile: strict\nnetwork:\n  allow: [x.com]\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := WithProfile(raw, "coding-agent")
	if err != nil {
		t.Fatal(err)
	}
	if p.Profile != "coding-agent" || p.Filesystem.Workspace != "" {
		t.Errorf("profile %q workspace %q: want coding-agent's", p.Profile, p.Filesystem.Workspace)
	}
	if got := p.Network.Allow[len(p.Network.Allow)-1]; got != "x.com" {
		t.Errorf("last allow = %q, want the file's x.com appended", got)
	}
	if _, err := WithProfile(raw, "nope"); err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `unknown profile "nope"`) {
		t.Errorf("unknown profile: %v", err)
	}
}
