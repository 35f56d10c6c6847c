package agent

import (
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/sandbox"
)

// TestDial opens streams to a listener on the guest's loopback: bytes go
// both ways, a half-close from either side is seen by the other, and
// several streams run at once.
func TestDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c) // until the host half-closes
				io.WriteString(c, "echo: "+string(b))
			}()
		}
	}()
	cfg := baseConfig()
	g := startGuest(t, guestOptions{config: &cfg})
	port := ln.Addr().(*net.TCPAddr).Port
	for i := 0; i < 3; i++ {
		c, err := g.client.Dial(testCtx(t), port)
		if err != nil {
			t.Fatal(err)
		}
		msg := "hello " + strconv.Itoa(i) + strings.Repeat("x", 200<<10)
		go func() {
			io.WriteString(c, msg)
			c.Close() // half-close: the listener's ReadAll ends
		}()
		b, err := io.ReadAll(c)
		if err != nil || string(b) != "echo: "+msg {
			t.Fatalf("dial %d: %v, %d bytes", i, err, len(b))
		}
	}
}

// TestDialRefused: nothing listening is ErrUnavailable, a bad port
// ErrInvalid (checked on both sides), and the session stays usable.
func TestDialRefused(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cfg := baseConfig()
	g := startGuest(t, guestOptions{config: &cfg})
	if _, err := g.client.Dial(testCtx(t), port); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("dial of a closed port: %v, want ErrUnavailable", err)
	}
	for _, p := range []int{0, -1, 65536} {
		if _, err := g.client.Dial(testCtx(t), p); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("dial port %d: %v, want ErrInvalid", p, err)
		}
	}
	// The guest checks too (a host that skipped the check).
	st, _, err := g.client.roundTrip(testCtx(t), "dial", &request{Op: opDial, Port: 70000})
	if err == nil {
		st.Close()
		t.Fatal("guest accepted port 70000")
	} else if !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("guest answer for port 70000: %v", err)
	}
	if err := g.client.Ping(testCtx(t)); err != nil {
		t.Fatalf("session unusable: %v", err)
	}
}
