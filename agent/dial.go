package agent

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

// Bounds of the dial operation.
const (
	// MaxDialStreams bounds the dial streams one guest keeps open; more
	// are refused with a limit error.
	MaxDialStreams = 64
	// dialTimeout bounds the guest's connect to its own loopback.
	dialTimeout = 5 * time.Second
)

func checkPort(port int) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("port %d: want 1..65535: %w", port, sandbox.ErrInvalid)
	}
	return nil
}

// Dial opens a byte stream to TCP port on the sandbox's own loopback
// (127.0.0.1 in the guest's network namespace): the host side of port
// routes and of a browser's DevTools connection. Only the host opens such
// streams; nothing inside the sandbox can. The returned connection is a
// yamux stream: Close half-closes (the guest's socket then reads EOF) and
// deadlines work. ErrUnavailable when nothing listens there.
func (c *Client) Dial(ctx context.Context, port int) (net.Conn, error) {
	if err := checkPort(port); err != nil {
		return nil, fmt.Errorf("agent dial: %w", err)
	}
	st, _, err := c.roundTrip(ctx, "agent dial", &request{Op: opDial, Port: port})
	if err != nil {
		return nil, err
	}
	return st, nil
}
