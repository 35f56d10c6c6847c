package e2b

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/interp"
)

type executeRequest struct {
	Code      string            `json:"code"`
	ContextID string            `json:"context_id"`
	Language  string            `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

// ndjson writes E2B's execution messages, one JSON object a line, each
// flushed as it is written; safe for the kernel's output goroutine and
// the request's.
type ndjson struct {
	mu sync.Mutex
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (n *ndjson) send(v map[string]any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	n.w.Write(append(b, '\n'))
	n.rc.Flush()
}

func stamp() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// execute runs one cell and streams E2B's messages: stdout and stderr as
// they come, the results (what the cell displayed, then its value), the
// error, the execution count, the end. env_vars hold for this cell only
// (interp.CellOptions.Env). A client that hangs up (E2B's SDKs
// do at their timeoutMs) interrupts the cell; its context's state is kept
// when the cell stops in the grace period.
func (ip *Interpreter) execute(w http.ResponseWriter, r *http.Request, c *client.Client, id string) {
	var req executeRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(&req); err != nil {
		writeErr(w, http.StatusBadRequest, "body: %v", err)
		return
	}
	if err := interp.CheckEnv(req.EnvVars); err != nil {
		writeErr(w, http.StatusBadRequest, "env_vars: %v", err)
		return
	}
	cc, status, err := ip.contextFor(r, c, id, req)
	if err != nil {
		writeErr(w, status, "%s", messageOf(err))
		return
	}
	k, err := cc.kernel(r.Context(), c, id)
	if err != nil {
		ip.dropIfGone(r, c, id)
		writeErr(w, statusOf(err), "%s", messageOf(err))
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	out := &ndjson{w: w, rc: http.NewResponseController(w)}
	out.rc.Flush()
	res, err := k.RunWith(r.Context(), req.Code, maxCell, interp.CellOptions{Env: req.EnvVars, OnOutput: func(name, text string) {
		out.send(map[string]any{"type": name, "text": text, "timestamp": stamp()})
	}})
	if err != nil {
		// The client left (its timeout): the cell was interrupted.
		ip.log.Debug("code interpreter: cell ended early", "sandbox", id, "context", cc.ID, "err", err)
		return
	}
	for _, d := range res.Displays {
		out.send(resultMessage(d, false))
	}
	if res.Data != nil {
		out.send(resultMessage(res.Data, true))
	}
	if res.Error != nil {
		out.send(map[string]any{"type": "error", "name": res.Error.Name, "value": res.Error.Value, "traceback": res.Error.Traceback})
	}
	out.send(map[string]any{"type": "number_of_executions", "execution_count": res.ExecutionCount})
	out.send(map[string]any{"type": "end_of_execution"})
}

// resultMessage is E2B's result message of bundle b.
func resultMessage(b interp.Bundle, main bool) map[string]any {
	m := map[string]any{"type": "result", "is_main_result": main}
	for k, v := range b {
		m[k] = v
	}
	return m
}

// contextFor is the context req runs in: the one it names, or the default
// one of its language (made on first use).
func (ip *Interpreter) contextFor(r *http.Request, c *client.Client, id string, req executeRequest) (*codeContext, int, error) {
	if req.ContextID != "" && req.Language != "" {
		return nil, http.StatusBadRequest, errors.New("context_id and language: give one, not both")
	}
	if req.ContextID != "" {
		cc := ip.get(id, req.ContextID)
		if cc == nil {
			return nil, http.StatusNotFound, errors.New("context " + req.ContextID + " not found")
		}
		return cc, 0, nil
	}
	lang, err := language(req.Language)
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	if cc := ip.defaultOf(id, lang); cc != nil {
		return cc, 0, nil
	}
	cc, err := ip.newContext(r.Context(), c, id, lang, "")
	if err != nil {
		return nil, statusOf(err), err
	}
	cc, ok := ip.add(id, cc, true)
	if !ok {
		return nil, http.StatusTooManyRequests, errors.New("too many contexts in this sandbox: remove one first")
	}
	return cc, 0, nil
}

// dropIfGone forgets the contexts of sandbox id when it no longer runs.
func (ip *Interpreter) dropIfGone(r *http.Request, c *client.Client, id string) {
	if _, err := c.Get(r.Context(), id); statusOf(err) == http.StatusNotFound {
		ip.forget(id)
	}
}
