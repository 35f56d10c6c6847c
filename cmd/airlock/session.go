package main

// Sessions (`airlock run --session NAME`): what every OS shares, the
// session's key. The daemon and its client are Linux-only
// (session_linux.go).

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"sort"
	"time"
)

// sessionFlags are the flags that choose how a session is reached, not
// what its sandbox is: they never change the session's key.
var sessionFlags = map[string]bool{"session": true, "end": true, "session-idle": true, "json": true, "result": true, "verbose": true}

// errSessionImage is why `--session` refuses an image (docs/sessions.md):
// with what to use instead.
const errSessionImage = "--session with an image (--image or filesystem.image) is not supported: a session keeps one sandbox over your workspace; " +
	"for one image sandbox kept across commands use `airlock sandbox create --image REF` and `airlock sandbox exec ID -- CMD` (airlock serve), " +
	"or run each command with `airlock run --image REF -- CMD`"

// defaultSessionIdle ends a session nobody used for this long.
const defaultSessionIdle = 15 * time.Minute

// sessionKey names one warm sandbox: the user, the working directory (the
// workspace by default), NAME, every flag that shapes the sandbox, and the
// policy file's content, so a changed policy or flag gets a new sandbox
// instead of reusing one made under the old rules.
func sessionKey(fs *flag.FlagSet, f *runFlags) string {
	h := sha256.New()
	cwd, _ := os.Getwd()
	write := func(s string) { h.Write([]byte(s)); h.Write([]byte{0}) }
	write("airlock-session-v1")
	write(itoa(os.Getuid()))
	write(cwd)
	write(f.session)
	var set []string
	fs.Visit(func(fl *flag.Flag) {
		if !sessionFlags[fl.Name] {
			set = append(set, fl.Name+"="+fl.Value.String())
		}
	})
	sort.Strings(set)
	for _, s := range set {
		write(s)
	}
	if f.policyFile != "" {
		b, err := os.ReadFile(f.policyFile)
		if err != nil {
			write("unreadable:" + err.Error())
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
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
