package e2b

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

// sandboxDetail is E2B's SandboxDetail (GET /sandboxes/{id}) and, less
// the domain and tokens, its ListedSandbox.
type sandboxDetail struct {
	TemplateID      string            `json:"templateID"`
	Alias           string            `json:"alias,omitempty"`
	SandboxID       string            `json:"sandboxID"`
	ClientID        string            `json:"clientID"`
	StartedAt       time.Time         `json:"startedAt"`
	EndAt           time.Time         `json:"endAt"`
	CPUCount        int               `json:"cpuCount"`
	MemoryMB        int64             `json:"memoryMB"`
	DiskSizeMB      int64             `json:"diskSizeMB"`
	State           string            `json:"state"`
	EnvdVersion     string            `json:"envdVersion"`
	Metadata        map[string]string `json:"metadata,omitempty"`
	Domain          string            `json:"domain,omitempty"`
	EnvdAccessToken string            `json:"envdAccessToken,omitempty"`
	AllowInternet   *bool             `json:"allowInternetAccess,omitempty"`
	Network         *networkConfig    `json:"network,omitempty"`
	Lifecycle       *lifecycle        `json:"lifecycle,omitempty"`
}

type lifecycle struct {
	OnTimeout  string `json:"onTimeout"`
	AutoResume bool   `json:"autoResume"`
}

// detail is E2B's view of sb.
func detail(sb *api.Sandbox) sandboxDetail {
	d := sandboxDetail{TemplateID: templateOf(sb), SandboxID: toE2BID(sb.ID), ClientID: clientIDE2B,
		StartedAt: sb.CreatedAt.UTC(), EndAt: endOf(sb), State: e2bState(sb), EnvdVersion: envdVersion,
		Metadata: metadataOf(sb)}
	d.CPUCount, d.MemoryMB, d.DiskSizeMB = resourcesOf(sb)
	if len(d.Metadata) == 0 {
		d.Metadata = nil
	}
	return d
}

// endOf is when sb's lease ends: its expiry (a kept-alive or paused one
// has none in /v1: now, as E2B shows a paused sandbox's end).
func endOf(sb *api.Sandbox) time.Time {
	if sb.ExpiresAt.IsZero() {
		return time.Now().UTC()
	}
	return sb.ExpiresAt.UTC()
}

// resourcesOf reads the CPU count, memory and disk (MiB) of sb's policy.
func resourcesOf(sb *api.Sandbox) (cpus int, memMB, diskMB int64) {
	var pol struct {
		Limits struct {
			CPUs   float64 `json:"cpus"`
			Memory int64   `json:"memory"`
			Disk   int64   `json:"disk"`
		} `json:"limits"`
	}
	_ = json.Unmarshal(sb.Policy, &pol)
	cpus = int(pol.Limits.CPUs + 0.999)
	if cpus < 1 {
		cpus = 1
	}
	memMB = pol.Limits.Memory >> 20
	if memMB == 0 {
		memMB = sb.MemoryMax >> 20
	}
	return cpus, memMB, pol.Limits.Disk >> 20
}

func (h *Handler) handleGet(w http.ResponseWriter, r *http.Request, c *client.Client) {
	sb, err := sandboxOf(r.Context(), r, c)
	if err != nil {
		writeFailure(w, err)
		return
	}
	d := detail(sb)
	d.Domain = h.domain(r)
	if n := networkOf(sb); n != nil {
		d.Network = n
	}
	if v, err := strconv.ParseBool(sb.Labels[labelInternet]); err == nil {
		d.AllowInternet = &v
	}
	lc := lifecycle{OnTimeout: "kill", AutoResume: sb.Labels[labelAutoResume] == "true"}
	if strings.HasPrefix(sb.Labels[labelOnTimeout], "pause") {
		lc.OnTimeout = "pause"
	}
	d.Lifecycle = &lc
	if tok, err := c.AccessToken(r.Context(), sb.ID, api.TokenScopeSandbox); err == nil {
		d.EnvdAccessToken = tok
		h.remember(sb, tok)
	}
	writeJSON(w, http.StatusOK, d)
}

func (h *Handler) handleKill(w http.ResponseWriter, r *http.Request, c *client.Client) {
	sb, err := sandboxOf(r.Context(), r, c)
	if err != nil {
		writeFailure(w, err)
		return
	}
	// While /v1 destroys it, its process and watch streams break (the
	// agent's session closes) before /v1 stops listing it as running:
	// the envd side must already see it as gone, so those streams end
	// the way E2B's SDK reads as "the sandbox was killed" (abort).
	h.kills.add(sb.ID)
	defer h.kills.remove(sb.ID)
	if err := c.Delete(r.Context(), sb.ID); err != nil {
		writeFailure(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// listed returns the caller's sandboxes in states (running, paused) whose
// metadata has every pair of md.
func listed(r *http.Request, c *client.Client, states []string, md map[string]string) ([]api.Sandbox, error) {
	var out []api.Sandbox
	for _, st := range states {
		l, err := c.List(r.Context(), client.ListOptions{Labels: md, State: st})
		if err != nil {
			return nil, err
		}
		for _, sb := range l {
			if st == "running" && (sb.State == api.StateFrozen || sb.State == api.StatePaused) {
				continue // a frozen sandbox is E2B's paused one
			}
			out = append(out, sb)
		}
		if st == "paused" {
			// E2B's pause with memory is /v1's freeze, listed as running.
			fr, err := c.List(r.Context(), client.ListOptions{Labels: md, State: "running"})
			if err != nil {
				return nil, err
			}
			for _, sb := range fr {
				if sb.State == api.StateFrozen {
					out = append(out, sb)
				}
			}
		}
	}
	return out, nil
}

// handleListLegacy is GET /sandboxes: running sandboxes, unpaged.
func (h *Handler) handleListLegacy(w http.ResponseWriter, r *http.Request, c *client.Client) {
	md, err := metadataFilter(r.URL.Query().Get("metadata"))
	if err != nil {
		writeFailure(w, err)
		return
	}
	l, err := listed(r, c, []string{"running"}, md)
	if err != nil {
		writeFailure(w, err)
		return
	}
	out := []sandboxDetail{}
	for i := range l {
		out = append(out, detail(&l[i]))
	}
	writeJSON(w, http.StatusOK, out)
}

// handleList is GET /v2/sandboxes: filtered by metadata, state and
// template, ordered by start time (then ID), paged with an opaque token.
func (h *Handler) handleList(w http.ResponseWriter, r *http.Request, c *client.Client) {
	lq, err := parseListQuery(r)
	if err != nil {
		writeFailure(w, err)
		return
	}
	md, states, desc, limit, after, tmpl, cur := lq.md, lq.states, lq.desc, lq.limit, lq.after, lq.tmpl, lq.cur
	all, err := listed(r, c, states, md)
	if err != nil {
		writeFailure(w, err)
		return
	}
	running := 0
	var keep []api.Sandbox
	for _, sb := range all {
		if (!after.IsZero() && !sb.CreatedAt.After(after)) || (tmpl != "" && templateOf(&sb) != tmpl) {
			continue
		}
		if e2bState(&sb) == "running" {
			running++
		}
		keep = append(keep, sb)
	}
	sort.Slice(keep, func(i, j int) bool {
		a, b := keep[i], keep[j]
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.Before(b.CreatedAt) != desc
		}
		return (a.ID < b.ID) != desc
	})
	var page []api.Sandbox
	for _, sb := range keep {
		if cur == nil || cur.before(sb, desc) {
			page = append(page, sb)
		}
	}
	next := ""
	if len(page) > limit {
		page = page[:limit]
		next = makeCursor(page[limit-1], desc)
	}
	out := []sandboxDetail{}
	for i := range page {
		out = append(out, detail(&page[i]))
	}
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	if slicesContains(states, "running") {
		w.Header().Set("X-Total-Running", strconv.Itoa(running))
	}
	writeJSON(w, http.StatusOK, out)
}

// listQuery is what GET /v2/sandboxes asks.
type listQuery struct {
	md     map[string]string
	states []string
	desc   bool
	limit  int
	after  time.Time
	tmpl   string
	cur    *cursor
}

func parseListQuery(r *http.Request) (*listQuery, error) {
	q := r.URL.Query()
	lq := &listQuery{states: []string{"running", "paused"}, desc: true, limit: 100, tmpl: q.Get("template")}
	var err error
	if lq.md, err = metadataFilter(q.Get("metadata")); err != nil {
		return nil, err
	}
	if s := q.Get("state"); s != "" {
		lq.states = nil
		for _, st := range strings.Split(s, ",") {
			if st != "running" && st != "paused" {
				return nil, errInvalid("state %q: want running or paused", st)
			}
			lq.states = append(lq.states, st)
		}
	}
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		lq.desc = false
	default:
		return nil, errInvalid("order %q: want asc or desc", q.Get("order"))
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return nil, errInvalid("limit %q: want 1..100", s)
		}
		lq.limit = min(n, 100)
	}
	if s := q.Get("startedAfter"); s != "" {
		if lq.after, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return nil, errInvalid("startedAfter %q: want RFC 3339", s)
		}
	}
	if strings.Contains(lq.tmpl, ":") {
		return nil, errInvalid("template %q: a template, not a tag", lq.tmpl)
	}
	if lq.cur, err = parseCursor(q.Get("nextToken"), lq.desc); err != nil {
		return nil, err
	}
	return lq, nil
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// cursor is where a page ended: the start time and ID of its last entry.
type cursor struct {
	at time.Time
	id string
}

// before: sb comes after the cursor in the listing's order.
func (c *cursor) before(sb api.Sandbox, desc bool) bool {
	if !sb.CreatedAt.Equal(c.at) {
		return sb.CreatedAt.After(c.at) != desc
	}
	return (sb.ID > c.id) != desc
}

func makeCursor(sb api.Sandbox, desc bool) string {
	s := sb.CreatedAt.UTC().Format(time.RFC3339Nano) + "__" + sb.ID
	if !desc {
		s += "__asc"
	}
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

func parseCursor(tok string, desc bool) (*cursor, error) {
	if tok == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return nil, errInvalid("Invalid next token")
	}
	parts := strings.Split(string(b), "__")
	asc := len(parts) == 3 && parts[2] == "asc"
	if len(parts) < 2 || len(parts) > 3 || asc == desc || (len(parts) == 3 && !asc) {
		return nil, errInvalid("Invalid next token")
	}
	at, err := time.Parse(time.RFC3339Nano, parts[0])
	if err != nil {
		return nil, errInvalid("Invalid next token")
	}
	return &cursor{at: at, id: parts[1]}, nil
}

// metadataFilter decodes E2B's metadata query: a URL-encoded
// "k1=v1&k2=v2" whose keys and values are URL-encoded once more.
func metadataFilter(raw string) (map[string]string, error) {
	if raw == "" {
		return nil, nil
	}
	s, err := url.QueryUnescape(raw)
	if err != nil {
		return nil, errInvalid("metadata %q: %v", raw, err)
	}
	md := map[string]string{}
	for _, pair := range strings.Split(s, "&") {
		kv := strings.Split(pair, "=")
		if len(kv) != 2 {
			return nil, errInvalid("metadata %q: want key=value pairs", raw)
		}
		k, err1 := url.QueryUnescape(kv[0])
		v, err2 := url.QueryUnescape(kv[1])
		if err1 != nil || err2 != nil || k == "" {
			return nil, errInvalid("metadata %q: bad pair %q", raw, pair)
		}
		if strings.HasPrefix(k, labelPrefix) {
			return nil, errInvalid("metadata key %q: the prefix %q is reserved", k, labelPrefix)
		}
		md[k] = v
	}
	return md, nil
}
