package e2b

import (
	"net/http"

	"github.com/airlock-dev/airlock/client"
)

// Fork and snapshots ride on /v1's fork and snapshot calls.

func (h *Handler) handleFork(w http.ResponseWriter, r *http.Request, c *client.Client) {
	if _, err := sandboxOf(r.Context(), r, c); err != nil {
		writeFailure(w, err)
		return
	}
	writeErr(w, http.StatusNotImplemented, "fork: not available on this server yet")
}

func (h *Handler) handleSnapshot(w http.ResponseWriter, r *http.Request, c *client.Client) {
	if _, err := sandboxOf(r.Context(), r, c); err != nil {
		writeFailure(w, err)
		return
	}
	writeErr(w, http.StatusNotImplemented, "snapshots: not available on this server yet")
}

func (h *Handler) handleSnapshots(w http.ResponseWriter, r *http.Request, c *client.Client) {
	writeJSON(w, http.StatusOK, []any{})
}

func (h *Handler) handleDeleteTemplate(w http.ResponseWriter, r *http.Request, c *client.Client) {
	writeErr(w, http.StatusNotFound, "template %q not found", r.PathValue("id"))
}
