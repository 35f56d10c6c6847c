// Package token mints and checks the server's stateless credentials: port
// tokens (one sandbox port until an expiry) and sandbox access tokens (one
// sandbox, one scope), both HMACs with a secret kept in the server's data
// directory, so they outlive a restart and nothing about them is stored.
// It never decides what a token reaches (the server's routes do) and
// never looks a sandbox up.
package token

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

// Bounds of port tokens.
const (
	DefaultPortTTL = 15 * time.Minute
	MaxPortTTL     = 24 * time.Hour
	keyFile        = "port-token.key"
)

// Signer mints and checks port tokens: "ID.PORT.EXPIRY.MAC", the MAC an
// HMAC-SHA256 over the first three with a secret of the server's data
// directory, so tokens outlive a restart and nothing about them is stored.
type Signer struct{ key []byte }

// Load reads the secret in dir, making it (32 random bytes, mode
// 0600) when there is none.
func Load(dir string) (*Signer, error) {
	p := filepath.Join(dir, keyFile)
	key, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		key = make([]byte, 32)
		rand.Read(key)
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("port token key %s: %w", p, err)
		}
		_, werr := f.Write(key)
		if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
			os.Remove(p)
			return nil, fmt.Errorf("port token key %s: %w", p, err)
		}
		return &Signer{key: key}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("port token key %s: %w", p, err)
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("port token key %s: %d bytes, want 32 (remove it to make a new one): %w", p, len(key), sandbox.ErrInvalid)
	}
	return &Signer{key: key}, nil
}

func (ps *Signer) mac(body string) string {
	m := hmac.New(sha256.New, ps.key)
	m.Write([]byte("airlock port token v1\x00" + body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Mint returns a token for port of sandbox id, valid until exp.
func (ps *Signer) Mint(id string, port int, exp time.Time) string {
	body := id + "." + strconv.Itoa(port) + "." + strconv.FormatInt(exp.Unix(), 10)
	return body + "." + ps.mac(body)
}

// Why a token is refused: ErrBad (401: malformed, forged or
// expired) or ErrScope (403: genuine, for another sandbox or port).
var (
	ErrBad   = errors.New("invalid or expired port token")
	ErrScope = errors.New("port token is for another sandbox or port")
)

// Check verifies tok for port of sandbox id at now.
func (ps *Signer) Check(tok, id string, port int, now time.Time) error {
	if len(tok) > 256 {
		return ErrBad
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 4 {
		return ErrBad
	}
	body := strings.Join(parts[:3], ".")
	if !hmac.Equal([]byte(parts[3]), []byte(ps.mac(body))) {
		return ErrBad
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || now.Unix() >= exp {
		return ErrBad
	}
	if parts[0] != id || parts[1] != strconv.Itoa(port) {
		return ErrScope
	}
	return nil
}
