package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/errdefs"
)

// parseForward parses [LOCAL:]REMOTE (LOCAL 0: any free port).
func parseForward(s string) (local, remote int, err error) {
	ls, rs, found := strings.Cut(s, ":")
	if !found {
		rs = ls
	}
	remote, err = strconv.Atoi(rs)
	if err != nil || remote < 1 || remote > 65535 {
		return 0, 0, fmt.Errorf("remote port %q: want 1..65535: %w", rs, errdefs.ErrInvalid)
	}
	local, err = strconv.Atoi(ls)
	if err != nil || local < 0 || local > 65535 {
		return 0, 0, fmt.Errorf("local port %q: want 0..65535: %w", ls, errdefs.ErrInvalid)
	}
	return local, remote, nil
}

// sbPortForward listens on 127.0.0.1:LOCAL and carries each connection to
// REMOTE on the sandbox's loopback, until interrupted or the sandbox ends.
func sbPortForward(ctx context.Context, c *client.Client, args []string) int {
	if len(args) != 2 {
		return fail("sandbox port-forward", fmt.Errorf("want ID [LOCAL:]REMOTE: %w", errdefs.ErrInvalid))
	}
	id := args[0]
	local, remote, err := parseForward(args[1])
	if err != nil {
		return fail("sandbox port-forward", err)
	}
	if _, err := c.Get(ctx, id); err != nil {
		return fail("sandbox port-forward", err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(local)))
	if err != nil {
		return fail("sandbox port-forward", err)
	}
	fmt.Fprintf(os.Stderr, "forwarding %s -> %s:%d\n", ln.Addr(), id, remote)
	context.AfterFunc(ctx, func() { ln.Close() })
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return 0 // interrupted: the normal end
			}
			return fail("sandbox port-forward", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			forwardConn(ctx, c, id, remote, conn)
		}()
	}
}

func forwardConn(ctx context.Context, c *client.Client, id string, port int, conn net.Conn) {
	defer conn.Close()
	up, err := c.DialPort(ctx, id, port)
	if err != nil {
		fmt.Fprintf(os.Stderr, "airlock sandbox port-forward: %v\n", err)
		return
	}
	defer up.Close()
	stop := context.AfterFunc(ctx, func() { up.Close(); conn.Close() })
	defer stop()
	done := make(chan struct{})
	go func() {
		io.Copy(conn, up)
		conn.Close()
		close(done)
	}()
	io.Copy(up, conn)
	up.Close()
	<-done
}
