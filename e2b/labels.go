package e2b

import (
	"encoding/json"
	"strings"

	"github.com/airlock-dev/airlock/api"
)

// What E2B keeps per sandbox beyond Airlock's model lives in /v1 labels
// under this prefix, hidden from E2B's metadata view (a caller's metadata
// key with it is refused).
const labelPrefix = "e2b."

// Labels of E2B-only state.
const (
	labelTemplate   = labelPrefix + "template"    // templateID as asked
	labelUser       = labelPrefix + "user"        // the default user of envd calls
	labelOnTimeout  = labelPrefix + "on_timeout"  // kill, pause, pause-fs
	labelAutoResume = labelPrefix + "auto_resume" // "true"
	labelPrivate    = labelPrefix + "private"     // "true": ports need the traffic token
	labelMaskHost   = labelPrefix + "mask_host"   // maskRequestHost
	labelNetwork    = labelPrefix + "network"     // the network config as given (JSON)
	labelInternet   = labelPrefix + "internet"    // allow_internet_access as given
	labelEnvs       = labelPrefix + "envs"        // names of the create's envVars, comma-separated
)

// metadataOf is the E2B metadata of sb: its labels less the reserved ones.
func metadataOf(sb *api.Sandbox) map[string]string {
	md := map[string]string{}
	for k, v := range sb.Labels {
		if !strings.HasPrefix(k, labelPrefix) {
			md[k] = v
		}
	}
	return md
}

// templateOf is the templateID sb was created from.
func templateOf(sb *api.Sandbox) string {
	if t := sb.Labels[labelTemplate]; t != "" {
		return t
	}
	if sb.Image != "" {
		return sb.Image
	}
	return "base"
}

// userOf is the user envd calls of sb run as by default.
func userOf(sb *api.Sandbox) string {
	if u := sb.Labels[labelUser]; u != "" {
		return u
	}
	return "root"
}

// networkOf is the network config sb was created (or last updated) with.
func networkOf(sb *api.Sandbox) *networkConfig {
	raw := sb.Labels[labelNetwork]
	if raw == "" {
		return nil
	}
	var n networkConfig
	if json.Unmarshal([]byte(raw), &n) != nil {
		return nil
	}
	return &n
}
