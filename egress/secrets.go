package egress

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// secret is a loaded policy.Secret: the real value stays here, the sandbox
// sees only placeholder.
type secret struct {
	name        string
	env         string
	placeholder string
	value       string
	hosts       []policy.NetworkEntry
}

// maxSecretLen bounds a secret read from a file.
const maxSecretLen = 64 << 10

func loadSecrets(list []policy.Secret, getenv func(string) string, readFile func(string) ([]byte, error)) ([]*secret, error) {
	var out []*secret
	seenEnv := map[string]bool{}
	for _, s := range list {
		if s.Name == "" {
			return nil, fmt.Errorf("secret: empty name: %w", sandbox.ErrInvalid)
		}
		env := s.Env
		if env == "" {
			env = s.Name
		}
		if seenEnv[env] {
			return nil, fmt.Errorf("secret %q: variable %s used twice: %w", s.Name, env, sandbox.ErrInvalid)
		}
		seenEnv[env] = true
		var value string
		switch {
		case s.FromEnv != "" && s.FromFile != "":
			return nil, fmt.Errorf("secret %q: both from_env and from_file: %w", s.Name, sandbox.ErrInvalid)
		case s.FromEnv != "":
			value = getenv(s.FromEnv)
			if value == "" {
				return nil, fmt.Errorf("secret %q: host variable %s is empty or unset: %w", s.Name, s.FromEnv, sandbox.ErrInvalid)
			}
		case s.FromFile != "":
			b, err := readFile(s.FromFile)
			if err != nil {
				return nil, fmt.Errorf("secret %q: read %s: %w", s.Name, s.FromFile, sandbox.ErrInvalid)
			}
			if len(b) > maxSecretLen {
				return nil, fmt.Errorf("secret %q: %s is larger than %d bytes: %w", s.Name, s.FromFile, maxSecretLen, sandbox.ErrInvalid)
			}
			value = strings.TrimRight(string(b), "\r\n")
			if value == "" {
				return nil, fmt.Errorf("secret %q: %s is empty: %w", s.Name, s.FromFile, sandbox.ErrInvalid)
			}
		default:
			return nil, fmt.Errorf("secret %q: needs from_env or from_file: %w", s.Name, sandbox.ErrInvalid)
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			return nil, fmt.Errorf("secret %q: value contains CR, LF or NUL (not valid in a header): %w", s.Name, sandbox.ErrInvalid)
		}
		if len(s.Hosts) == 0 {
			return nil, fmt.Errorf("secret %q: no hosts: %w", s.Name, sandbox.ErrInvalid)
		}
		sec := &secret{name: s.Name, env: env, value: value}
		for _, h := range s.Hosts {
			e, err := policy.ParseNetworkEntry(h)
			if err != nil {
				return nil, fmt.Errorf("secret %q: host: %w", s.Name, err)
			}
			if e.Host == "" {
				return nil, fmt.Errorf("secret %q: host %q: secrets go to names, not addresses: %w", s.Name, h, sandbox.ErrInvalid)
			}
			sec.hosts = append(sec.hosts, e)
		}
		var rnd [16]byte
		if _, err := rand.Read(rnd[:]); err != nil {
			return nil, fmt.Errorf("secret %q: random placeholder: %w", s.Name, err)
		}
		sec.placeholder = "airlock-secret-" + sanitizeName(s.Name) + "-" + hex.EncodeToString(rnd[:])
		if strings.Contains(value, sec.placeholder) {
			return nil, fmt.Errorf("secret %q: value contains its placeholder: %w", s.Name, sandbox.ErrInvalid)
		}
		out = append(out, sec)
	}
	return out, nil
}

// allowedFor reports whether s may be sent to name:port.
func (s *secret) allowedFor(name string, port uint16) bool {
	for _, e := range s.hosts {
		if e.Match(policy.Host{Name: name}, int(port)) {
			return true
		}
	}
	return false
}

// headerHit is what replaceHeaders did for one secret.
type headerHit struct {
	secret   *secret
	replaced bool
	headers  []string
}

// replaceHeaders substitutes the placeholders found in h's values for the
// secrets allowed to reach name:port (name "" when the destination is not
// eligible, e.g. plain HTTP). Placeholders of other secrets are left alone
// and reported.
func replaceHeaders(h http.Header, secrets []*secret, name string, port uint16) []headerHit {
	var hits []headerHit
	for _, s := range secrets {
		var hit *headerHit
		ok := name != "" && s.allowedFor(name, port)
		for k, vs := range h {
			for i, v := range vs {
				if !strings.Contains(v, s.placeholder) {
					continue
				}
				if hit == nil {
					hits = append(hits, headerHit{secret: s, replaced: ok})
					hit = &hits[len(hits)-1]
				}
				hit.headers = append(hit.headers, k)
				if ok {
					vs[i] = strings.ReplaceAll(v, s.placeholder, s.value)
				}
			}
		}
	}
	return hits
}

// scrubHeaders replaces real secret values in response headers with their
// placeholders, so a server echoing a credential does not hand it to the
// sandbox.
func scrubHeaders(h http.Header, secrets []*secret) {
	for _, s := range secrets {
		for _, vs := range h {
			for i, v := range vs {
				if strings.Contains(v, s.value) {
					vs[i] = strings.ReplaceAll(v, s.value, s.placeholder)
				}
			}
		}
	}
}

// containsPlaceholder lists secrets whose placeholder occurs in b.
func containsPlaceholder(b []byte, secrets []*secret) []*secret {
	var out []*secret
	for _, s := range secrets {
		if bytes.Contains(b, []byte(s.placeholder)) {
			out = append(out, s)
		}
	}
	return out
}
