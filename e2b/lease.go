package e2b

import (
	"context"
	"net/http"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

// A sandbox's E2B lease is its /v1 timeout: setTimeout overwrites it,
// connect and refresh only extend it. A paused sandbox keeps no lease.

type timeoutBody struct {
	Timeout *int  `json:"timeout"`
	Memory  *bool `json:"memory"`
}

func secs(n int) time.Duration { return time.Duration(max(n, 0)) * time.Second }

func (h *Handler) handleTimeout(w http.ResponseWriter, r *http.Request, c *client.Client) {
	var b timeoutBody
	if err := decode(r, &b); err != nil {
		writeFailure(w, err)
		return
	}
	if b.Timeout == nil {
		writeErr(w, http.StatusBadRequest, "timeout: required (seconds)")
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
	if _, err := c.SetTimeout(r.Context(), sb.ID, secs(*b.Timeout)); err != nil {
		writeFailure(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// extend makes running sandbox sb's lease end no earlier than d from now.
func extend(ctx context.Context, c *client.Client, sb *api.Sandbox, d time.Duration) (*api.Sandbox, error) {
	if !sb.ExpiresAt.IsZero() && !time.Now().Add(d).After(sb.ExpiresAt) {
		return sb, nil
	}
	if sb.KeepAlive {
		// Kept alive by an E2B pause before: the lease starts again.
		if _, err := c.SetKeepAlive(ctx, sb.ID, false); err != nil {
			return nil, err
		}
	}
	return c.SetTimeout(ctx, sb.ID, d)
}

func (h *Handler) handleRefresh(w http.ResponseWriter, r *http.Request, c *client.Client) {
	var b struct {
		Duration *int `json:"duration"`
	}
	if err := decode(r, &b); err != nil {
		writeFailure(w, err)
		return
	}
	d := 15
	if b.Duration != nil && *b.Duration > d {
		d = *b.Duration
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
	if _, err := extend(r.Context(), c, sb, secs(d)); err != nil {
		writeFailure(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleConnect extends a running sandbox's lease (200) or resumes a
// paused one (201).
func (h *Handler) handleConnect(w http.ResponseWriter, r *http.Request, c *client.Client) {
	var b timeoutBody
	if err := decode(r, &b); err != nil {
		writeFailure(w, err)
		return
	}
	lease := defaultLease
	if b.Timeout != nil {
		lease = *b.Timeout
	}
	sb, err := sandboxOf(r.Context(), r, c)
	if err != nil {
		if isNotFound(err) {
			writeErr(w, http.StatusNotFound, "Paused sandbox %s not found", r.PathValue("id"))
			return
		}
		writeFailure(w, err)
		return
	}
	status := http.StatusOK
	if e2bState(sb) == "running" {
		sb, err = extend(r.Context(), c, sb, secs(lease))
	} else {
		status = http.StatusCreated
		sb, err = resume(r.Context(), c, sb, secs(lease))
	}
	if err != nil {
		writeFailure(w, err)
		return
	}
	out, err := h.describe(r, c, sb)
	if err != nil {
		writeFailure(w, err)
		return
	}
	writeJSON(w, status, out)
}

// resume starts paused (or thaws frozen) sandbox sb with a lease of d.
func resume(ctx context.Context, c *client.Client, sb *api.Sandbox, d time.Duration) (*api.Sandbox, error) {
	if _, err := c.Resume(ctx, sb.ID); err != nil {
		return nil, err
	}
	if _, err := c.SetKeepAlive(ctx, sb.ID, false); err != nil {
		return nil, err
	}
	return c.SetTimeout(ctx, sb.ID, d)
}

// handleResume is the deprecated resume: 409 for a running sandbox.
func (h *Handler) handleResume(w http.ResponseWriter, r *http.Request, c *client.Client) {
	var b timeoutBody
	if err := decode(r, &b); err != nil {
		writeFailure(w, err)
		return
	}
	lease := defaultLease
	if b.Timeout != nil {
		lease = *b.Timeout
	}
	sb, err := sandboxOf(r.Context(), r, c)
	if err != nil {
		writeFailure(w, err)
		return
	}
	if e2bState(sb) == "running" {
		writeErr(w, http.StatusConflict, "sandbox %q is already running", toE2BID(sb.ID))
		return
	}
	if sb, err = resume(r.Context(), c, sb, secs(lease)); err != nil {
		writeFailure(w, err)
		return
	}
	out, err := h.describe(r, c, sb)
	if err != nil {
		writeFailure(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

// handlePause pauses a running sandbox: with memory (the default) its
// processes are frozen in place (/v1's freeze), else they end and its
// files are kept (/v1's pause). A paused sandbox keeps no lease.
func (h *Handler) handlePause(w http.ResponseWriter, r *http.Request, c *client.Client) {
	var b timeoutBody
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
		writeErr(w, http.StatusConflict, "sandbox %q is already paused", toE2BID(sb.ID))
		return
	}
	if err := pause(r.Context(), c, sb.ID, b.Memory == nil || *b.Memory); err != nil {
		writeFailure(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// pause pauses sandbox id, keeping its processes' memory or not.
func pause(ctx context.Context, c *client.Client, id string, memory bool) error {
	if !memory {
		_, err := c.Pause(ctx, id)
		return err
	}
	if _, err := c.SetKeepAlive(ctx, id, true); err != nil {
		return err
	}
	_, err := c.Freeze(ctx, id)
	return err
}
