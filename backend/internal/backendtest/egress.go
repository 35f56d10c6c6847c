package backendtest

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/airlock-dev/airlock/audit"
)

// Hello is what HelloServer answers.
const Hello = "HELLO-FROM-HOST"

// HelloServer starts a plain HTTP server on the host's loopback that
// answers Hello to every request, closed when the test ends, and returns
// its port: the upstream of the backends' egress tests.
func HelloServer(t testing.TB) int {
	t.Helper()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, Hello)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// Events is an audit sink that keeps every event it is given.
type Events struct {
	mu  sync.Mutex
	all []audit.Event
}

// Emit records e.
func (e *Events) Emit(ev audit.Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

// All returns a copy of the events so far.
func (e *Events) All() []audit.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]audit.Event(nil), e.all...)
}

// LastProgram is the program the egress proxy named on the last request
// event, "unverified: WHY" when it could not name one, or "" when no
// request was seen.
func (e *Events) LastProgram() string {
	all := e.All()
	for i := len(all) - 1; i >= 0; i-- {
		if f := all[i].Fields; f["request"] == true {
			if p, ok := f["program"].(string); ok {
				return p
			}
			return fmt.Sprint("unverified: ", f["program_unverified"])
		}
	}
	return ""
}
