package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/interp"
)

// Interpreter serves E2B's code interpreter (port 49999: POST /execute
// streaming NDJSON, /contexts) over Airlock's interpreter kernels (package
// interp), each a /v1 background process of the sandbox run as its
// template's user. A context is one kernel with its own state and working
// directory; E2B's default context of a language is made on first use.
// The kernels are the only state held here: they are processes of the
// sandbox and end with it. Safe for concurrent use.
type Interpreter struct {
	log *slog.Logger
	mu  sync.Mutex
	sbs map[string]*sbContexts // Airlock sandbox ID -> its contexts
}

type sbContexts struct {
	ctxs     map[string]*codeContext
	defaults map[string]string // language -> its default context's ID
}

// codeContext is one E2B context: a kernel started on first use and again
// after a restart or its death.
type codeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`

	user string
	env  map[string]string
	mu   sync.Mutex // guards k
	k    *interp.Kernel
}

// maxContexts bounds the contexts of one sandbox (each is a process).
const maxContexts = 64

// maxCell bounds a cell when the client never hangs up.
const maxCell = time.Hour

// NewInterpreter returns the code interpreter; log may be nil.
func NewInterpreter(log *slog.Logger) *Interpreter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Interpreter{log: log, sbs: map[string]*sbContexts{}}
}

// Serve answers one request of the interpreter's port for sandbox id,
// acting as c (the sandbox's access token). It is a CodeInterpreter.
func (ip *Interpreter) Serve(w http.ResponseWriter, r *http.Request, c *client.Client, id string) {
	p := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case p == "/health" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	case p == "/execute" && r.Method == http.MethodPost:
		ip.execute(w, r, c, id)
	case p == "/contexts" && r.Method == http.MethodPost:
		ip.createContext(w, r, c, id)
	case p == "/contexts" && r.Method == http.MethodGet:
		ip.listContexts(w, id)
	case strings.HasPrefix(p, "/contexts/"):
		rest := strings.TrimPrefix(p, "/contexts/")
		cid, verb, _ := strings.Cut(rest, "/")
		switch {
		case verb == "" && r.Method == http.MethodDelete:
			ip.removeContext(w, id, cid)
		case verb == "restart" && r.Method == http.MethodPost:
			ip.restartContext(w, id, cid)
		default:
			writeErr(w, http.StatusNotFound, "no such route: %s %s", r.Method, r.URL.Path)
		}
	default:
		writeErr(w, http.StatusNotFound, "no such route: %s %s", r.Method, r.URL.Path)
	}
}

// language is E2B's language name as one of the kernels'.
func language(l string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(l)) {
	case "", "python", "python3", "py":
		return interp.Python, nil
	case "javascript", "js", "node", "nodejs":
		return interp.JavaScript, nil
	case "bash", "sh", "shell":
		return interp.Bash, nil
	}
	return "", fmt.Errorf("language %q is not supported here: python, javascript or bash", l)
}

func newContextID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// newContext makes a context of lang in cwd for sandbox id (not yet
// started), as the sandbox's default user in its home.
func (ip *Interpreter) newContext(ctx context.Context, c *client.Client, id, lang, cwd string) (*codeContext, error) {
	sb, err := c.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	user := userOf(sb)
	home := homeOf(user)
	switch {
	case cwd == "" || cwd == "~":
		cwd = home
	case strings.HasPrefix(cwd, "~/"):
		cwd = path.Join(home, cwd[2:])
	case !strings.HasPrefix(cwd, "/"):
		cwd = path.Join(home, cwd)
	}
	env := map[string]string{"E2B_SANDBOX": "true", "E2B_SANDBOX_ID": toE2BID(id), "HOME": home, "USER": user, "LOGNAME": user}
	return &codeContext{ID: newContextID(), Language: lang, Cwd: path.Clean(cwd), user: user, env: env}, nil
}

// add registers cc for sandbox id; false when it has too many.
func (ip *Interpreter) add(id string, cc *codeContext, asDefault bool) (*codeContext, bool) {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	s := ip.sbs[id]
	if s == nil {
		s = &sbContexts{ctxs: map[string]*codeContext{}, defaults: map[string]string{}}
		ip.sbs[id] = s
	}
	if asDefault {
		if d := s.ctxs[s.defaults[cc.Language]]; d != nil {
			return d, true // made meanwhile by another call
		}
	}
	if len(s.ctxs) >= maxContexts {
		return nil, false
	}
	s.ctxs[cc.ID] = cc
	if asDefault {
		s.defaults[cc.Language] = cc.ID
	}
	return cc, true
}

func (ip *Interpreter) get(id, cid string) *codeContext {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	if s := ip.sbs[id]; s != nil {
		return s.ctxs[cid]
	}
	return nil
}

func (ip *Interpreter) defaultOf(id, lang string) *codeContext {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	if s := ip.sbs[id]; s != nil {
		return s.ctxs[s.defaults[lang]]
	}
	return nil
}

type createContextRequest struct {
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

func (ip *Interpreter) createContext(w http.ResponseWriter, r *http.Request, c *client.Client, id string) {
	var req createContextRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		writeErr(w, http.StatusBadRequest, "body: %v", err)
		return
	}
	lang, err := language(req.Language)
	if err != nil {
		writeErr(w, http.StatusBadRequest, "%v", err)
		return
	}
	cc, err := ip.newContext(r.Context(), c, id, lang, req.Cwd)
	if err != nil {
		writeErr(w, statusOf(err), "%s", messageOf(err))
		return
	}
	// Started now, so a bad cwd or a missing interpreter is said here.
	if _, err := cc.kernel(r.Context(), c, id); err != nil {
		writeErr(w, statusOf(err), "create context: %s", messageOf(err))
		return
	}
	if _, ok := ip.add(id, cc, false); !ok {
		cc.close()
		writeErr(w, http.StatusTooManyRequests, "sandbox has %d contexts already: remove one first", maxContexts)
		return
	}
	writeJSON(w, http.StatusOK, cc)
}

func (ip *Interpreter) listContexts(w http.ResponseWriter, id string) {
	ip.mu.Lock()
	list := []*codeContext{}
	if s := ip.sbs[id]; s != nil {
		for _, cc := range s.ctxs {
			list = append(list, cc)
		}
	}
	ip.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	writeJSON(w, http.StatusOK, list)
}

func (ip *Interpreter) removeContext(w http.ResponseWriter, id, cid string) {
	ip.mu.Lock()
	s := ip.sbs[id]
	var cc *codeContext
	if s != nil {
		cc = s.ctxs[cid]
		delete(s.ctxs, cid)
		for l, d := range s.defaults {
			if d == cid {
				delete(s.defaults, l)
			}
		}
	}
	ip.mu.Unlock()
	if cc == nil {
		writeErr(w, http.StatusNotFound, "context %s not found", cid)
		return
	}
	cc.close()
	w.WriteHeader(http.StatusNoContent)
}

func (ip *Interpreter) restartContext(w http.ResponseWriter, id, cid string) {
	cc := ip.get(id, cid)
	if cc == nil {
		writeErr(w, http.StatusNotFound, "context %s not found", cid)
		return
	}
	cc.close() // the next cell starts a new kernel in the same cwd
	w.WriteHeader(http.StatusNoContent)
}

// kernel is cc's running kernel, started when there is none.
func (cc *codeContext) kernel(ctx context.Context, c *client.Client, id string) (*interp.Kernel, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.k != nil {
		select {
		case <-cc.k.Done():
			cc.k = nil
		default:
			return cc.k, nil
		}
	}
	k, err := interp.Start(ctx, v1Exec(c, id, cc.user), interp.Options{Language: cc.Language, Env: cc.env, Dir: cc.Cwd})
	if err != nil {
		return nil, err
	}
	cc.k = k
	return k, nil
}

func (cc *codeContext) close() {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.k != nil {
		cc.k.Close()
		cc.k = nil
	}
}

// forget drops the contexts of sandbox id (it is gone).
func (ip *Interpreter) forget(id string) {
	ip.mu.Lock()
	s := ip.sbs[id]
	delete(ip.sbs, id)
	ip.mu.Unlock()
	if s != nil {
		for _, cc := range s.ctxs {
			cc.close()
		}
	}
}
