package e2b

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

// metric is E2B's SandboxMetric.
type metric struct {
	Timestamp     time.Time `json:"timestamp"`
	TimestampUnix int64     `json:"timestampUnix"`
	CPUCount      int       `json:"cpuCount"`
	CPUUsedPct    float64   `json:"cpuUsedPct"`
	MemUsed       int64     `json:"memUsed"`
	MemTotal      int64     `json:"memTotal"`
	MemCache      int64     `json:"memCache"`
	DiskUsed      int64     `json:"diskUsed"`
	DiskTotal     int64     `json:"diskTotal"`
}

// sample is a metric of sb taken now from its /v1 resource use: memory in
// use, and CPU as the average share of its CPUs since it started.
func sample(sb *api.Sandbox) metric {
	now := time.Now().UTC()
	cpus, memMB, diskMB := resourcesOf(sb)
	m := metric{Timestamp: now, TimestampUnix: now.Unix(), CPUCount: cpus, MemTotal: memMB << 20, DiskTotal: diskMB << 20}
	if st := sb.Stats; st != nil {
		m.MemUsed = st.MemoryBytes
		if up := now.Sub(sb.CreatedAt); up > 0 {
			m.CPUUsedPct = 100 * float64(st.CPUNanos) / float64(up.Nanoseconds()) / float64(cpus)
		}
	}
	return m
}

// handleMetrics answers the sandbox's resource use: /v1 keeps no history,
// so the range holds the one sample taken now when now is in it.
func (h *Handler) handleMetrics(w http.ResponseWriter, r *http.Request, c *client.Client) {
	sb, err := sandboxOf(r.Context(), r, c)
	if err != nil {
		writeFailure(w, err)
		return
	}
	q := r.URL.Query()
	start, end := sb.CreatedAt.Add(-time.Second), time.Now().Add(time.Second)
	if s := q.Get("start"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			writeErr(w, http.StatusBadRequest, "start %q: want unix seconds", s)
			return
		}
		start = time.Unix(n, 0)
	}
	if s := q.Get("end"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			writeErr(w, http.StatusBadRequest, "end %q: want unix seconds", s)
			return
		}
		end = time.Unix(n, 0).Add(time.Second)
	}
	out := []metric{}
	if m := sample(sb); !m.Timestamp.Before(start) && !m.Timestamp.After(end) {
		out = append(out, m)
	}
	writeJSON(w, http.StatusOK, out)
}

// handleMetricsMany is GET /sandboxes/metrics?sandbox_ids=a,b: the latest
// sample of each.
func (h *Handler) handleMetricsMany(w http.ResponseWriter, r *http.Request, c *client.Client) {
	ids := strings.Split(r.URL.Query().Get("sandbox_ids"), ",")
	if len(ids) > 100 {
		writeErr(w, http.StatusBadRequest, "sandbox_ids: at most 100")
		return
	}
	out := map[string]metric{}
	for _, e := range ids {
		id, ok := fromE2BID(e)
		if !ok {
			continue
		}
		sb, err := c.Get(r.Context(), id)
		if err != nil || sb.State == "stopped" {
			continue
		}
		out[e] = sample(sb)
	}
	writeJSON(w, http.StatusOK, map[string]any{"sandboxes": out})
}

type logLine struct {
	Timestamp time.Time `json:"timestamp"`
	Line      string    `json:"line"`
}

type logEntry struct {
	Timestamp time.Time         `json:"timestamp"`
	Level     string            `json:"level"`
	Message   string            `json:"message"`
	Fields    map[string]string `json:"fields"`
}

// events returns the sandbox's audit events as E2B log entries, from
// startMS (unix milliseconds), at most limit.
func events(r *http.Request, c *client.Client, startMS int64, limit int) ([]logEntry, error) {
	sb, err := sandboxOf(r.Context(), r, c)
	if err != nil {
		return nil, err
	}
	evs, err := c.Events(r.Context(), sb.ID, 0)
	if err != nil {
		return nil, err
	}
	out := []logEntry{}
	for _, e := range evs {
		if e.Time.UnixMilli() < startMS {
			continue
		}
		level := "info"
		if e.Type == "violation" || e.Type == "denied" {
			level = "warn"
		}
		f := map[string]string{"type": e.Type}
		for k, v := range e.Fields {
			if s, ok := v.(string); ok {
				f[k] = s
			}
		}
		out = append(out, logEntry{Timestamp: e.Time.UTC(), Level: level, Message: e.Type + ": " + e.Message, Fields: f})
		if len(out) == limit {
			break
		}
	}
	return out, nil
}

func intQuery(r *http.Request, name string, def int64) int64 {
	n, err := strconv.ParseInt(r.URL.Query().Get(name), 10, 64)
	if err != nil {
		return def
	}
	return n
}

func (h *Handler) handleLogs(w http.ResponseWriter, r *http.Request, c *client.Client) {
	ents, err := events(r, c, intQuery(r, "start", 0), int(min(max(intQuery(r, "limit", 1000), 1), 1000)))
	if err != nil {
		writeFailure(w, err)
		return
	}
	lines := make([]logLine, 0, len(ents))
	for _, e := range ents {
		lines = append(lines, logLine{Timestamp: e.Timestamp, Line: e.Message})
	}
	writeJSON(w, http.StatusOK, map[string]any{"logs": lines, "logEntries": ents})
}

func (h *Handler) handleLogsV2(w http.ResponseWriter, r *http.Request, c *client.Client) {
	ents, err := events(r, c, intQuery(r, "cursor", 0), int(min(max(intQuery(r, "limit", 1000), 1), 1000)))
	if err != nil {
		writeFailure(w, err)
		return
	}
	if lv := r.URL.Query().Get("level"); lv != "" {
		keep := ents[:0]
		for _, e := range ents {
			if e.Level == lv || (lv != "warn" && lv != "error") {
				keep = append(keep, e)
			}
		}
		ents = keep
	}
	writeJSON(w, http.StatusOK, map[string]any{"logs": ents})
}

// handleNetwork replaces a running sandbox's egress rules (omitted fields
// are cleared, as in E2B).
func (h *Handler) handleNetwork(w http.ResponseWriter, r *http.Request, c *client.Client) {
	var b struct {
		networkConfig
		AllowInternet *bool `json:"allow_internet_access"`
	}
	if err := decode(r, &b); err != nil {
		writeFailure(w, err)
		return
	}
	sb, err := sandboxOf(r.Context(), r, c)
	if err != nil {
		writeFailure(w, err)
		return
	}
	if e2bState(sb) != "running" {
		writeErr(w, http.StatusConflict, "sandbox %q is paused", toE2BID(sb.ID))
		return
	}
	nr, err := networkPolicy(b.AllowInternet, &b.networkConfig)
	if err != nil {
		writeFailure(w, err)
		return
	}
	if err := c.SetNetwork(r.Context(), sb.ID, nr); err != nil {
		writeFailure(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// template is E2B's Template, for an image of the server's store.
type template struct {
	TemplateID    string     `json:"templateID"`
	BuildID       string     `json:"buildID"`
	CPUCount      int        `json:"cpuCount"`
	MemoryMB      int        `json:"memoryMB"`
	DiskSizeMB    int        `json:"diskSizeMB"`
	Public        bool       `json:"public"`
	Aliases       []string   `json:"aliases"`
	Names         []string   `json:"names"`
	CreatedAt     time.Time  `json:"createdAt"`
	UpdatedAt     time.Time  `json:"updatedAt"`
	CreatedBy     *struct{}  `json:"createdBy"`
	LastSpawnedAt *time.Time `json:"lastSpawnedAt"`
	SpawnCount    int        `json:"spawnCount"`
	BuildCount    int        `json:"buildCount"`
	EnvdVersion   string     `json:"envdVersion"`
	BuildStatus   string     `json:"buildStatus"`
}

func templates(r *http.Request, c *client.Client) ([]template, error) {
	imgs, err := c.Images(r.Context())
	if err != nil {
		return nil, err
	}
	out := []template{}
	for _, im := range imgs {
		names := []string{}
		for _, n := range im.Names {
			names = append(names, shortName(n))
		}
		id := im.ID
		if len(names) > 0 {
			id = names[0]
		}
		out = append(out, template{TemplateID: id, BuildID: im.ID, CPUCount: 1, MemoryMB: 1024, Public: true,
			Aliases: names, Names: names, CreatedAt: im.Added.UTC(), UpdatedAt: im.Added.UTC(), BuildCount: 1,
			EnvdVersion: envdVersion, BuildStatus: "ready"})
	}
	return out, nil
}

// shortName drops a default registry and tag from an image name.
func shortName(n string) string {
	n = strings.TrimPrefix(n, "docker.io/")
	n = strings.TrimPrefix(n, "library/")
	return strings.TrimSuffix(n, ":latest")
}

func (h *Handler) handleTemplatesLegacy(w http.ResponseWriter, r *http.Request, c *client.Client) {
	t, err := templates(r, c)
	if err != nil {
		writeFailure(w, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (h *Handler) handleTemplates(w http.ResponseWriter, r *http.Request, c *client.Client) {
	t, err := templates(r, c)
	if err != nil {
		writeFailure(w, err)
		return
	}
	if n := int(intQuery(r, "limit", 100)); n > 0 && n < len(t) {
		t = t[:n]
	}
	writeJSON(w, http.StatusOK, t)
}

func (h *Handler) handleTemplateAlias(w http.ResponseWriter, r *http.Request, c *client.Client) {
	name := r.PathValue("alias")
	if _, err := c.Image(r.Context(), name); err != nil {
		writeFailure(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"templateID": name, "public": true})
}
