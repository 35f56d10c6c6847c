package agent

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/hashicorp/yamux"

	"github.com/airlock-dev/airlock/sandbox"
)

// dial connects to req.Port on the guest's loopback and copies bytes both
// ways until both directions ended (see Client.Dial).
func (g *guest) dial(st *yamux.Stream, req *request) {
	if err := checkPort(req.Port); err != nil {
		respondErr(st, err)
		return
	}
	g.mu.Lock()
	if g.dials >= MaxDialStreams {
		g.mu.Unlock()
		respondErr(st, fmt.Errorf("dial: %d streams already open: %w", MaxDialStreams, sandbox.ErrLimit))
		return
	}
	g.dials++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.dials--
		g.mu.Unlock()
	}()
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(req.Port)), dialTimeout)
	if err != nil {
		respondErr(st, fmt.Errorf("dial 127.0.0.1:%d: %v: %w", req.Port, errors.Unwrap(err), sandbox.ErrUnavailable))
		return
	}
	defer conn.Close()
	if err := respond(st, &response{}); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		io.Copy(conn, st)
		conn.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	io.Copy(st, conn)
	st.Close() // half-close: the host reads EOF
	<-done
}
