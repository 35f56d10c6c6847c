package e2b

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

// Fork and snapshots ride on /v1's fork and snapshot calls. Airlock's
// fork is all or none: every entry of E2B's per-fork answer is a sandbox,
// or the whole call fails with the reason.

// forkBody is the body of E2B's POST /sandboxes/{id}/fork.
type forkBody struct {
	Timeout *int `json:"timeout"` // seconds
	Count   int  `json:"count"`
}

// forkEntry is one entry of E2B's fork answer.
type forkEntry struct {
	Sandbox *sandboxOut `json:"sandbox,omitempty"`
	Error   *apiError   `json:"error,omitempty"`
}

// snapshotInfo is E2B's SnapshotInfo.
type snapshotInfo struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

func (h *Handler) handleFork(w http.ResponseWriter, r *http.Request, c *client.Client) {
	sb, err := sandboxOf(r.Context(), r, c)
	if err != nil {
		writeFailure(w, err)
		return
	}
	var body forkBody
	if err := decode(r, &body); err != nil {
		writeFailure(w, err)
		return
	}
	lease := defaultLease
	if body.Timeout != nil {
		lease = *body.Timeout
	}
	if lease <= 0 {
		writeFailure(w, errInvalid("timeout %d: must be positive (seconds)", lease))
		return
	}
	res, err := c.Fork(r.Context(), sb.ID, api.ForkRequest{Count: body.Count, Timeout: api.Duration(time.Duration(lease) * time.Second)})
	if err != nil {
		writeFailure(w, err)
		return
	}
	out, err := h.describeAll(r, c, res.Sandboxes)
	if err != nil {
		writeFailure(w, err)
		return
	}
	entries := make([]forkEntry, len(out))
	for i := range out {
		entries[i].Sandbox = out[i]
	}
	writeJSON(w, http.StatusCreated, entries)
}

// describeAll is describe of every sandbox a fork made; on error it takes
// them all back (a fork is all or none).
func (h *Handler) describeAll(r *http.Request, c *client.Client, sbs []api.Sandbox) ([]*sandboxOut, error) {
	out := make([]*sandboxOut, 0, len(sbs))
	for i := range sbs {
		o, err := h.describe(r, c, &sbs[i])
		if err != nil {
			for j := range sbs {
				_ = c.Delete(context.WithoutCancel(r.Context()), sbs[j].ID)
			}
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

func (h *Handler) handleSnapshot(w http.ResponseWriter, r *http.Request, c *client.Client) {
	sb, err := sandboxOf(r.Context(), r, c)
	if err != nil {
		writeFailure(w, err)
		return
	}
	var body struct {
		Name string `json:"name"`
	}
	if err := decode(r, &body); err != nil {
		writeFailure(w, err)
		return
	}
	snap, err := c.Snapshot(r.Context(), sb.ID, body.Name)
	if err != nil {
		writeFailure(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, snapshotOf(snap))
}

func snapshotOf(s *api.Snapshot) snapshotInfo {
	si := snapshotInfo{SnapshotID: s.ID, Names: []string{}}
	if s.Name != "" {
		si.Names = append(si.Names, s.Name)
	}
	return si
}

// handleSnapshots lists the tenant's snapshots (of one sandbox with
// ?sandboxID=), paginated as E2B's list of sandboxes is.
func (h *Handler) handleSnapshots(w http.ResponseWriter, r *http.Request, c *client.Client) {
	q := r.URL.Query()
	id := ""
	if e := q.Get("sandboxID"); e != "" {
		var ok bool
		if id, ok = fromE2BID(e); !ok {
			writeJSON(w, http.StatusOK, []snapshotInfo{})
			return
		}
	}
	snaps, err := c.Snapshots(r.Context(), id)
	if err != nil {
		writeFailure(w, err)
		return
	}
	out := []snapshotInfo{}
	name := q.Get("name")
	for i := range snaps {
		if name == "" || snaps[i].Name == name {
			out = append(out, snapshotOf(&snaps[i]))
		}
	}
	start := 0
	if tok := q.Get("nextToken"); tok != "" {
		for i := range out {
			if out[i].SnapshotID == tok {
				start = i
			}
		}
	}
	out = out[start:]
	if n := int(intQuery(r, "limit", 100)); n > 0 && n < len(out) {
		w.Header().Set("X-Next-Token", out[n].SnapshotID)
		out = out[:n]
	}
	writeJSON(w, http.StatusOK, out)
}

// handleDeleteTemplate deletes a snapshot (E2B's SDK deletes snapshots
// as templates); templates themselves are the image store's, which the
// operator manages.
func (h *Handler) handleDeleteTemplate(w http.ResponseWriter, r *http.Request, c *client.Client) {
	id := r.PathValue("id")
	if err := c.DeleteSnapshot(r.Context(), id); err != nil {
		writeFailure(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// snapshotPrefix starts snapshot IDs (E2B's SDK creates from one by
// passing it as the template).
const snapshotPrefix = "snap-"

// createFromSnapshot answers an E2B create whose template is one of the
// tenant's snapshots (E2B's Sandbox.create(snapshotId)): its ID or name.
func (h *Handler) createFromSnapshot(w http.ResponseWriter, r *http.Request, c *client.Client, req *newSandbox) {
	lease := defaultLease
	if req.Timeout != nil {
		lease = *req.Timeout
	}
	if lease <= 0 {
		writeFailure(w, errInvalid("timeout %d: must be positive (seconds)", lease))
		return
	}
	labels := map[string]string{}
	for k, v := range req.Metadata {
		if strings.HasPrefix(k, labelPrefix) {
			writeFailure(w, errInvalid("metadata key %q: the prefix %q is reserved", k, labelPrefix))
			return
		}
		labels[k] = v
	}
	res, err := c.CreateFromSnapshot(r.Context(), req.TemplateID, api.ForkRequest{Timeout: api.Duration(time.Duration(lease) * time.Second), Labels: labels})
	if err != nil {
		writeFailure(w, err)
		return
	}
	out, err := h.describeAll(r, c, res.Sandboxes)
	if err != nil {
		writeFailure(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, out[0])
}
