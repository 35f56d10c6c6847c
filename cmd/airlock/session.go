package main

// Sessions (`airlock run --session NAME`): what every OS shares, the
// session's key. The daemon and its client are Linux-only
// (session_linux.go).

import (
	"time"

	"github.com/airlock-dev/airlock/cmd/airlock/internal/sessclient"
)

// errSessionImage is why `--session` refuses an image (docs/sessions.md):
// with what to use instead.
const errSessionImage = "--session with an image (--image or filesystem.image) is not supported: a session keeps one sandbox over your workspace; " +
	"for one image sandbox kept across commands use `airlock sandbox create --image REF` and `airlock sandbox exec ID -- CMD` (airlock serve), " +
	"or run each command with `airlock run --image REF -- CMD`"

// defaultSessionIdle ends a session nobody used for this long.
const defaultSessionIdle = 15 * time.Minute

// sessionKey names one warm sandbox from run's flag arguments (those
// before the command): sessclient.Key, the same key its fast path dials.
func sessionKey(flagArgs []string) string {
	flags, _, _ := sessclient.ParseFlags(flagArgs)
	return sessclient.Key(flags)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
