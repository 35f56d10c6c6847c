package server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// TestDoorSlowBodyIsCut: on a door's listener (ServeDoor, the E2B
// adapter's) a client that stops sending its body loses the connection
// after the I/O timeout, as on the API's own listeners (TestSlowBodyIsCut),
// and the handler reading the body gets an error rather than waiting.
func TestDoorSlowBodyIsCut(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *Config) { c.IOTimeout = 300 * time.Millisecond })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	readErr := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		readErr <- err
	})
	go ts.srv.ServeDoor(ln, nil, h, func(*http.Request) string { return "" })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /sandboxes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	// The condition is the server's close (end of file or a reset); the
	// deadline is only a hang guard, far above the 300ms I/O timeout.
	c.SetReadDeadline(time.Now().Add(2 * time.Minute))
	b, err := io.ReadAll(c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection still open at the hang guard: %q", b)
	}
	select {
	case err := <-readErr:
		if err == nil {
			t.Fatal("the handler read a whole body that was never sent")
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the handler is still reading the body at the hang guard")
	}
}
