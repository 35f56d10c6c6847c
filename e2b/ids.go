package e2b

import "strings"

// E2B's clients build hosts PORT-ID.DOMAIN and its proxies accept sandbox
// IDs of [a-z0-9] only, so an Airlock ID "sb-0123abcd..." travels as
// "sb0123abcd...".

// toE2BID is the E2B form of Airlock sandbox ID id.
func toE2BID(id string) string { return strings.Replace(id, "-", "", 1) }

// fromE2BID is the Airlock ID of E2B sandbox ID e; ok false when e is not
// one this adapter handed out.
func fromE2BID(e string) (string, bool) {
	rest, ok := strings.CutPrefix(e, "sb")
	if !ok || rest == "" || len(rest) > 64 {
		return "", false
	}
	for _, c := range rest {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", false
		}
	}
	return "sb-" + rest, true
}
