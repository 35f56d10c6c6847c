package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/interp"
	"github.com/airlock-dev/airlock/sandbox"
)

// defaultCodeTimeout bounds a cell whose request gives no timeout.
const defaultCodeTimeout = 60 * time.Second

// codeKernels holds the code interpreters (package interp) of live
// sandboxes: at most one per sandbox and language, started on first use and
// dropped with the sandbox. A kernel is a process inside the sandbox, so it
// has exactly the sandbox's policy; the host only relays cells to it.
type codeKernels struct {
	mu sync.Mutex
	m  map[string]map[string]*codeSlot // sandbox ID -> language -> slot
}

// codeSlot serializes the cells of one interpreter; k is nil until started
// and again after it died.
type codeSlot struct {
	sem chan struct{}
	k   *interp.Kernel
}

// slot returns l's slot for lang, registering l (and a watcher that closes
// its kernels when it ends) on first use.
func (ck *codeKernels) slot(l *live, lang string) *codeSlot {
	id := l.sb.ID()
	ck.mu.Lock()
	defer ck.mu.Unlock()
	if ck.m == nil {
		ck.m = map[string]map[string]*codeSlot{}
	}
	langs := ck.m[id]
	if langs == nil {
		langs = map[string]*codeSlot{}
		ck.m[id] = langs
		go func() {
			<-l.gone
			ck.mu.Lock()
			slots := ck.m[id]
			delete(ck.m, id)
			ck.mu.Unlock()
			for _, sl := range slots {
				sl.sem <- struct{}{}
				if sl.k != nil {
					sl.k.Close()
				}
				<-sl.sem
			}
		}()
	}
	sl := langs[lang]
	if sl == nil {
		sl = &codeSlot{sem: make(chan struct{}, 1)}
		langs[lang] = sl
	}
	return sl
}

// handleCode runs a cell in the sandbox's interpreter for the language,
// starting it when there is none (or the last one died).
func (s *Server) handleCode(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r)
	l, release := s.acquire(w, r)
	if l == nil {
		return
	}
	defer release()
	var req api.CodeRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	lang := req.Language
	if lang == "" {
		lang = api.LanguagePython
	}
	if !slices.Contains(interp.Languages(), lang) {
		s.writeError(w, r, errBadRequest("language %q: want %s", lang, strings.Join(interp.Languages(), " or ")))
		return
	}
	if strings.TrimSpace(req.Code) == "" {
		s.writeError(w, r, errBadRequest("code: empty"))
		return
	}
	timeout := req.Timeout.D()
	if timeout == 0 {
		timeout = defaultCodeTimeout
	}
	if timeout > s.cfg.MaxTimeout {
		s.writeError(w, r, errBadRequest("timeout %s: longer than %s", timeout, s.cfg.MaxTimeout))
		return
	}
	s.events.emit(audit.Event{Sandbox: l.sb.ID(), Type: audit.TypeExec, Message: "code run through the API",
		Fields: map[string]any{"language": lang, "bytes": len(req.Code), "tenant": c.tenant}})

	sl := s.code.slot(l, lang)
	select {
	case sl.sem <- struct{}{}:
		defer func() { <-sl.sem }()
	case <-r.Context().Done():
		s.writeError(w, r, r.Context().Err())
		return
	case <-l.gone:
		s.writeError(w, r, fmt.Errorf("run code in %q: %w", l.sb.ID(), sandbox.ErrClosed))
		return
	}
	start := time.Now()
	var res *interp.Result
	fresh := false
	for attempt := 0; ; attempt++ {
		if sl.k == nil {
			k, err := s.startKernel(r.Context(), l, lang)
			if err != nil {
				s.writeError(w, r, fmt.Errorf("run code in %q: %w", l.sb.ID(), err))
				return
			}
			sl.k, fresh = k, true
		}
		var err error
		res, err = sl.k.Run(r.Context(), req.Code, timeout)
		if err == nil {
			break
		}
		if errors.Is(err, sandbox.ErrClosed) && attempt == 0 {
			// It died between cells (OOM, killed from inside): one new one.
			sl.k = nil
			continue
		}
		s.writeError(w, r, fmt.Errorf("run code in %q: %w", l.sb.ID(), err))
		return
	}
	if res.Lost {
		sl.k = nil
	}
	writeJSON(w, http.StatusOK, codeResult(lang, res, fresh, time.Since(start)))
}

// startKernel starts lang's interpreter in l with the environment every
// exec gets (the sandbox's env and its egress proxy variables).
func (s *Server) startKernel(ctx context.Context, l *live, lang string) (*interp.Kernel, error) {
	sreq, err := s.execRequest(l, &api.ExecRequest{Args: []string{lang}})
	if err != nil {
		return nil, err
	}
	// The kernel outlives the request that started it (not the sandbox).
	exec := func(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
		return l.sb.Exec(context.WithoutCancel(ctx), req)
	}
	return interp.Start(ctx, exec, interp.Options{Language: lang, Env: sreq.Env})
}

func codeResult(lang string, r *interp.Result, fresh bool, d time.Duration) api.CodeResult {
	out := api.CodeResult{
		Language: lang, Stdout: r.Stdout, Stderr: r.Stderr, Result: r.Value, Truncated: r.Truncated,
		ExecutionCount: r.ExecutionCount, NewInterpreter: fresh, StateLost: r.Lost,
		DurationMS: float64(d.Microseconds()) / 1000,
	}
	if r.Error != nil {
		out.Error = &api.CodeError{Name: r.Error.Name, Value: r.Error.Value, Traceback: r.Error.Traceback}
	}
	for _, im := range r.Images {
		out.Images = append(out.Images, api.CodeImage{Format: im.Format, Data: im.Data})
	}
	return out
}
