package e2b

import (
	"encoding/hex"
	"net/http"
	"strings"
)

// AliasPrefix starts the E2B form of an Airlock API key. E2B's SDKs from
// 2.27 to 2.50 refuse keys that do not match ^e2b_[0-9a-f]+$ unless
// E2B_VALIDATE_API_KEY=false: "e2b_" + the hex of the whole Airlock key
// passes that check and carries the key unchanged.
const AliasPrefix = "e2b_"

// Alias is the E2B form of Airlock API key key.
func Alias(key string) string { return AliasPrefix + hex.EncodeToString([]byte(key)) }

// keyOf returns the Airlock API key of a control-API request: its
// X-API-Key header, in either form, or an Authorization Bearer token (the
// form E2B's access-token login uses). Empty when there is none.
func keyOf(r *http.Request) string {
	k := strings.TrimSpace(r.Header.Get("X-API-Key"))
	if k == "" {
		k, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		k = strings.TrimSpace(k)
	}
	if h, ok := strings.CutPrefix(k, AliasPrefix); ok {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) > 512 {
			return "" // not an alias of ours: refused as no key
		}
		return string(b)
	}
	return k
}

// Credential returns what a request to this door authenticates with, in
// the form the adapter forwards to /v1: an Airlock API key (control API)
// or a sandbox access token (envd, the code interpreter, ports); "" when
// it carries none. The server counts the request's connection against
// that credential's tenant.
func Credential(r *http.Request) string {
	if k := keyOf(r); k != "" {
		return k
	}
	if t := r.Header.Get("X-Access-Token"); t != "" {
		return t
	}
	return r.Header.Get(headerTraffic)
}
