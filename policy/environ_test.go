package policy

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestEnvironNeverPassesSecrets(t *testing.T) {
	p := &Policy{Process: Process{EnvAllow: []string{
		"PATH", "HOME", "LC_*", "MY_*", "OPENAI_API_KEY", "GITHUB_TOKEN", "DB_PASSWORD", "AWS_*", "CLIENT_SECRET",
		"API_KEY", "Stripe_Key", "ANTHROPIC_*", "GOOGLE_APPLICATION_CREDENTIALS", "SSH_AUTH_SOCK", "NPM_TOKEN",
	}}}
	host := []string{
		"PATH=/usr/bin:/bin", "HOME=/home/a", "LC_ALL=C", "MY_VAR=ok", "MY_API_KEY=k1", "MY_TOKEN=t1",
		"MY_SECRET_THING=s1", "MY_SECRETS=s2", "OPENAI_API_KEY=k2", "GITHUB_TOKEN=t2", "DB_PASSWORD=p",
		"AWS_REGION=eu", "AWS_SECRET_ACCESS_KEY=k3", "CLIENT_SECRET=s3", "API_KEY=k4", "Stripe_Key=k5",
		"ANTHROPIC_API_KEY=k6", "ANTHROPIC_BASE_URL=https://x", "ANTHROPIC_AUTH_TOKEN=t3",
		"GOOGLE_APPLICATION_CREDENTIALS=/c.json", "SSH_AUTH_SOCK=/s", "NPM_TOKEN=t4", "my_token=t5",
		"UNLISTED=x", "MALFORMED", "=nokey", "LC_CTYPE=en_US.UTF-8",
	}
	got := p.Environ(host)
	want := []string{"ANTHROPIC_BASE_URL=https://x", "HOME=/home/a", "LC_ALL=C", "LC_CTYPE=en_US.UTF-8", "MY_VAR=ok", "PATH=/usr/bin:/bin"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Environ =\n  %q\nwant\n  %q", got, want)
	}
	for _, kv := range got {
		for _, bad := range []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AWS_"} {
			if strings.Contains(strings.ToUpper(kv), bad) {
				t.Errorf("%q passed", kv)
			}
		}
	}
}

func TestEnvironSetWinsAndSorted(t *testing.T) {
	p := &Policy{Process: Process{EnvAllow: []string{"PATH", "TERM"}, Env: map[string]string{"PATH": "/sbin", "ZED": "z", "API_TOKEN": "placeholder"}}}
	got := p.Environ([]string{"TERM=xterm", "PATH=/usr/bin", "TERM=dumb"})
	want := []string{"API_TOKEN=placeholder", "PATH=/sbin", "TERM=dumb", "ZED=z"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Environ = %q, want %q (set values win, explicit sets are not filtered, last duplicate wins)", got, want)
	}
}

func TestDefaultEnvAllowHasNoSecrets(t *testing.T) {
	for _, name := range Profiles() {
		p, _ := Profile(name)
		for _, a := range p.Process.EnvAllow {
			if IsSecretName(strings.TrimSuffix(a, "*")) {
				t.Errorf("profile %s allows %q, a secret name", name, a)
			}
		}
		env := p.Environ([]string{"ANTHROPIC_API_KEY=x", "CLAUDE_CODE_OAUTH_TOKEN=y", "OPENAI_API_KEY=z", "LANG=C"})
		if !slices.Equal(env, []string{"LANG=C"}) {
			t.Errorf("profile %s environ = %q", name, env)
		}
	}
}

func TestIsSecretName(t *testing.T) {
	for _, n := range []string{"API_KEY", "x_key", "GH_TOKEN", "TOKEN", "MYSECRET", "PGPASSWORD", "AWS_PROFILE", "DATABASE_URL", "SENTRY_DSN", "GITHUB_PAT", "AZURE_CLIENT_ID"} {
		if !IsSecretName(n) {
			t.Errorf("IsSecretName(%q) = false", n)
		}
	}
	for _, n := range []string{"PATH", "HOME", "KEYBOARD", "LANG", "TERM", "EDITOR", "MONKEY"} {
		if IsSecretName(n) {
			t.Errorf("IsSecretName(%q) = true", n)
		}
	}
}
