package policy

import (
	"strings"
)

// SecretPatterns are case-insensitive glob patterns ("*" matches any run of
// characters) of variable names that look like credentials. Matching host
// variables never enter a sandbox, even when env_allow names them; a policy
// can still set such a variable explicitly in process.env.
var SecretPatterns = []string{
	"*_KEY", "*_KEY_*", "*APIKEY*", "*API_KEY*", "*PRIVATE*",
	"*TOKEN*", "*SECRET*", "*PASSWORD*", "*PASSWD*", "*_PASS", "*_PAT",
	"*CREDENTIAL*", "*COOKIE*", "*SESSION*", "*_AUTH", "*_AUTH_*",
	"*_DSN", "DATABASE_URL", "*_DATABASE_URL",
	"AWS_*", "AZURE_*", "GCP_*", "GOOGLE_*", "KUBECONFIG",
	"SSH_AUTH_SOCK", "SSH_AGENT_PID", "GPG_AGENT_INFO", "GNUPGHOME",
	"DOCKER_HOST", "DOCKER_CONFIG", "VAULT_*", "NETRC",
}

// ImageOwnedEnv are variables an image sandbox takes from its image (or
// the image user's passwd entry), never from the host: the host's PATH
// and HOME mean nothing in another root filesystem. process.env still
// sets them.
var ImageOwnedEnv = map[string]bool{"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "SHELL": true}

// IsSecretName reports whether a variable name matches SecretPatterns.
func IsSecretName(name string) bool {
	u := strings.ToUpper(name)
	for _, p := range SecretPatterns {
		if glob(p, u) {
			return true
		}
	}
	return false
}

// glob matches name against pattern where "*" is any run of characters.
func glob(pattern, name string) bool {
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return pattern == name
	}
	if !strings.HasPrefix(name, pattern[:star]) {
		return false
	}
	rest := pattern[star+1:]
	name = name[star:]
	if rest == "" {
		return true
	}
	for i := 0; i <= len(name); i++ {
		if glob(rest, name[i:]) {
			return true
		}
	}
	return false
}

// envAllowed reports whether env_allow lets name through.
func (p *Policy) envAllowed(name string) bool {
	for _, a := range p.Process.EnvAllow {
		if pre, ok := strings.CutSuffix(a, "*"); ok {
			if strings.HasPrefix(name, pre) {
				return true
			}
		} else if a == name {
			return true
		}
	}
	return false
}

// Environ returns the sandbox's base environment ("K=V", sorted by name):
// the host variables env_allow lets through, minus every name matching
// SecretPatterns, plus (overriding) process.env. host is usually
// os.Environ(); a later duplicate wins, malformed entries are ignored.
func (p *Policy) Environ(host []string) []string {
	m := map[string]string{}
	for _, kv := range host {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !ValidEnvName(k) || strings.IndexByte(v, 0) >= 0 {
			continue
		}
		if p.envAllowed(k) && !IsSecretName(k) && !(p.Filesystem.Image != "" && ImageOwnedEnv[k]) {
			m[k] = v
		}
	}
	for k, v := range p.Process.Env {
		m[k] = v
	}
	keys := sortedKeys(m)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + m[k]
	}
	return out
}
