package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/errdefs"
)

// Lease bounds of E2B's API.
const (
	defaultLease = 300 // seconds: create and connect without a timeout
	allTraffic   = "0.0.0.0/0"
)

// newSandbox is the body of POST /sandboxes (SDK 2.45) and POST
// /v2/sandboxes (2.51): the later one never sends secure (always
// secured) and sends timeout only when set.
type newSandbox struct {
	TemplateID      string            `json:"templateID"`
	Timeout         *int              `json:"timeout"`
	Metadata        map[string]string `json:"metadata"`
	EnvVars         map[string]string `json:"envVars"`
	Secure          *bool             `json:"secure"`
	AllowInternet   *bool             `json:"allow_internet_access"`
	Network         *networkConfig    `json:"network"`
	AutoPause       *bool             `json:"autoPause"`
	AutoPauseMemory *bool             `json:"autoPauseMemory"`
	AutoResume      *struct {
		Enabled bool `json:"enabled"`
	} `json:"autoResume"`
	MCP          json.RawMessage `json:"mcp"`
	IAM          json.RawMessage `json:"iam"`
	VolumeMounts []struct {
		Name string `json:"name"`
		Path string `json:"path"`
	} `json:"volumeMounts"`
}

// networkConfig is E2B's SandboxNetworkConfig.
type networkConfig struct {
	AllowOut           []string        `json:"allowOut,omitempty"`
	DenyOut            []string        `json:"denyOut,omitempty"`
	AllowPublicTraffic *bool           `json:"allowPublicTraffic,omitempty"`
	MaskRequestHost    string          `json:"maskRequestHost,omitempty"`
	Rules              json.RawMessage `json:"rules,omitempty"`
	EgressProxy        json.RawMessage `json:"egressProxy,omitempty"`
	HTTPSPorts         []int           `json:"httpsPorts,omitempty"`
}

// sandboxOut is E2B's Sandbox: the answer of create, connect and fork.
type sandboxOut struct {
	SandboxID          string  `json:"sandboxID"`
	TemplateID         string  `json:"templateID"`
	Alias              string  `json:"alias,omitempty"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken,omitempty"`
	Domain             string  `json:"domain"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
}

func (h *Handler) handleCreate(w http.ResponseWriter, r *http.Request, c *client.Client) {
	var req newSandbox
	if err := decode(r, &req); err != nil {
		writeFailure(w, err)
		return
	}
	if strings.HasPrefix(req.TemplateID, snapshotPrefix) {
		h.createFromSnapshot(w, r, c, &req)
		return
	}
	creq, err := h.plan(r.Context(), c, &req)
	if err != nil {
		writeFailure(w, err)
		return
	}
	sb, err := c.Create(r.Context(), creq)
	if errors.Is(err, errdefs.ErrNotFound) && req.TemplateID != "" {
		// No such image: a snapshot's name, perhaps (looked up only
		// here, so that a create from a template costs no extra call).
		if _, serr := c.GetSnapshot(r.Context(), req.TemplateID); serr == nil {
			h.createFromSnapshot(w, r, c, &req)
			return
		}
	}
	if err != nil {
		writeFailure(w, err)
		return
	}
	out, err := h.describe(r, c, sb)
	if err != nil {
		// The sandbox exists but cannot be handed out: take it back.
		_ = c.Delete(context.WithoutCancel(r.Context()), sb.ID)
		writeFailure(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

// plan turns an E2B create into a /v1 one.
func (h *Handler) plan(ctx context.Context, c *client.Client, req *newSandbox) (api.CreateSandboxRequest, error) {
	var creq api.CreateSandboxRequest
	if req.TemplateID == "" {
		req.TemplateID = "base"
	}
	if len(req.IAM) > 0 && string(req.IAM) != "null" {
		return creq, errInvalid("iam: workload identity tokens are E2B's own and not supported here")
	}
	if len(req.VolumeMounts) > 0 {
		return creq, errInvalid("volumeMounts: E2B volumes are not supported here (Airlock's named volumes are, through /v1)")
	}
	lease := defaultLease
	if req.Timeout != nil {
		lease = *req.Timeout
	}
	if lease <= 0 {
		return creq, errInvalid("timeout %d: must be positive (seconds)", lease)
	}
	autoPause := req.AutoPause != nil && *req.AutoPause
	if req.AutoPauseMemory != nil && !*req.AutoPauseMemory {
		if !autoPause {
			return creq, errInvalid("autoPauseMemory false needs autoPause")
		}
		if req.AutoResume != nil && req.AutoResume.Enabled {
			return creq, errInvalid("autoPauseMemory false cannot be combined with autoResume")
		}
	}
	labels, err := labelsOf(req, autoPause)
	if err != nil {
		return creq, err
	}
	pol, err := policyOf(req.AllowInternet, req.Network)
	if err != nil {
		return creq, err
	}
	labels[labelUser] = h.templateUser(ctx, c, req.TemplateID)
	creq = api.CreateSandboxRequest{
		Image:       req.TemplateID,
		Timeout:     api.Duration(time.Duration(lease) * time.Second),
		Labels:      labels,
		Env:         req.EnvVars,
		Policy:      pol,
		AutoResume:  labels[labelAutoResume] == "true",
		PublicPorts: labels[labelPrivate] != "true",
	}
	if autoPause {
		creq.OnTimeout = api.OnTimeoutPause
	}
	// The tokens describe hands out come with the create's answer: one
	// round trip fewer (two for a private sandbox).
	creq.AccessTokens = []string{api.TokenScopeSandbox}
	if !creq.PublicPorts {
		creq.AccessTokens = append(creq.AccessTokens, api.TokenScopePorts)
	}
	return creq, nil
}

// labelsOf is the /v1 labels of an E2B create: its metadata and the
// adapter's own state under the reserved prefix.
func labelsOf(req *newSandbox, autoPause bool) (map[string]string, error) {
	labels := map[string]string{labelTemplate: req.TemplateID}
	for k, v := range req.Metadata {
		if strings.HasPrefix(k, labelPrefix) {
			return nil, errInvalid("metadata key %q: the prefix %q is reserved", k, labelPrefix)
		}
		labels[k] = v
	}
	switch {
	case autoPause && req.AutoPauseMemory != nil && !*req.AutoPauseMemory:
		labels[labelOnTimeout] = "pause-fs"
	case autoPause:
		labels[labelOnTimeout] = "pause"
	}
	if req.AutoResume != nil && req.AutoResume.Enabled {
		labels[labelAutoResume] = "true"
	}
	if n := req.Network; n != nil {
		if n.AllowPublicTraffic != nil && !*n.AllowPublicTraffic {
			labels[labelPrivate] = "true"
		}
		if n.MaskRequestHost != "" {
			labels[labelMaskHost] = n.MaskRequestHost
		}
		if b, _ := json.Marshal(n); len(b) <= 256 {
			labels[labelNetwork] = string(b)
		}
	}
	if req.AllowInternet != nil {
		labels[labelInternet] = strconv.FormatBool(*req.AllowInternet)
	}
	if len(req.EnvVars) > 0 {
		names := make([]string, 0, len(req.EnvVars))
		for k := range req.EnvVars {
			names = append(names, k)
		}
		sort.Strings(names)
		if s := strings.Join(names, ","); len(s) <= 256 {
			labels[labelEnvs] = s
		}
	}
	return labels, nil
}

// UserLabel is the image label naming the user envd calls run as by
// default in a sandbox whose image runs as root: E2B's templates run their
// sandbox as root and envd's calls as "user" (`user: root` on request).
const UserLabel = "dev.airlock.e2b-user"

// templateUser is the user envd calls run as by default in sandboxes of
// template: the image's UserLabel (E2B's templates made by
// scripts/e2b-templates.sh: "user"; the image itself runs as root, which
// the sandbox's setup needs), else its user by name, root when it names
// none or a numeric one.
func (h *Handler) templateUser(ctx context.Context, c *client.Client, template string) string {
	img, err := c.Image(ctx, template)
	if err != nil {
		return "root"
	}
	if u := img.Config.Labels[UserLabel]; u != "" && validUserName(u) {
		return u
	}
	u, _, _ := strings.Cut(img.Config.User, ":")
	if u == "" || u == "0" || strings.Trim(u, "0123456789") == "" {
		return "root"
	}
	return u
}

// policyOf is the inline /v1 policy for E2B's network settings.
func policyOf(internet *bool, n *networkConfig) (json.RawMessage, error) {
	type netPolicy struct {
		Mode  string   `json:"mode"`
		Allow []string `json:"allow,omitempty"`
		Deny  []string `json:"deny,omitempty"`
	}
	np, err := networkPolicy(internet, n)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(map[string]any{"network": netPolicy{Mode: np.Mode, Allow: np.Allow, Deny: np.Deny}})
	return b, err
}

// networkPolicy maps E2B's egress settings onto /v1 network rules: deny of
// all traffic (or no internet access) is an allow-list of allowOut,
// anything else is open less denyOut.
func networkPolicy(internet *bool, n *networkConfig) (api.NetworkRequest, error) {
	var allow, deny []string
	if n != nil {
		if len(n.Rules) > 0 && string(n.Rules) != "null" && string(n.Rules) != "{}" {
			return api.NetworkRequest{}, errInvalid("network.rules: header transforms are not supported here")
		}
		if len(n.EgressProxy) > 0 && string(n.EgressProxy) != "null" {
			return api.NetworkRequest{}, errInvalid("network.egressProxy: an upstream proxy is not supported here")
		}
		allow, deny = n.AllowOut, n.DenyOut
	}
	denyAll := slices.Contains(deny, allTraffic) || (internet != nil && !*internet)
	if !denyAll {
		for _, a := range allow {
			if isDomain(a) {
				return api.NetworkRequest{}, errInvalid("When specifying allowed domains in allow out, you must include 'ALL_TRAFFIC' in deny out (%s)", allTraffic)
			}
		}
		return api.NetworkRequest{Mode: "open", Deny: deny}, nil
	}
	if allow == nil {
		allow = []string{}
	}
	return api.NetworkRequest{Mode: "allowlist", Allow: allow}, nil
}

// isDomain: entry names a host rather than an address or range.
func isDomain(entry string) bool {
	return strings.ContainsFunc(entry, func(c rune) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '*' })
}

// describe is E2B's Sandbox for sb, with its access tokens: those sb
// carries (the answer of a create that asked for them), else asked for.
func (h *Handler) describe(r *http.Request, c *client.Client, sb *api.Sandbox) (*sandboxOut, error) {
	tok, err := accessToken(r.Context(), c, sb, api.TokenScopeSandbox)
	if err != nil {
		return nil, err
	}
	out := &sandboxOut{SandboxID: toE2BID(sb.ID), TemplateID: templateOf(sb), ClientID: clientIDE2B,
		EnvdVersion: envdVersion, EnvdAccessToken: tok, Domain: h.domain(r)}
	h.remember(sb, tok)
	if sb.Labels[labelPrivate] == "true" {
		t, err := accessToken(r.Context(), c, sb, api.TokenScopePorts)
		if err != nil {
			return nil, err
		}
		out.TrafficAccessToken = &t
	}
	return out, nil
}

// accessToken is sb's token of scope: the one its create's answer
// carries, else one more /v1 call.
func accessToken(ctx context.Context, c *client.Client, sb *api.Sandbox, scope string) (string, error) {
	for _, t := range sb.AccessTokens {
		if t.Scope == scope && t.Sandbox == sb.ID {
			return t.Token, nil
		}
	}
	return c.AccessToken(ctx, sb.ID, scope)
}

// validUserName: a user name of /etc/passwd's usual shape.
func validUserName(u string) bool {
	if len(u) == 0 || len(u) > 32 {
		return false
	}
	for i, c := range u {
		if !(c >= 'a' && c <= 'z' || c == '_' || i > 0 && (c >= '0' && c <= '9' || c == '-')) {
			return false
		}
	}
	return true
}
