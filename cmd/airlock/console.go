package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/sandbox"
)

func init() {
	register(command{name: "console", short: "print a one-time login link to airlock serve's web console", run: runConsole})
}

// runConsole asks the server on its local socket (which only the local
// operator can reach) for a one-time login link and prints it.
func runConsole(args []string) int {
	fs := flag.NewFlagSet("airlock console", flag.ContinueOnError)
	socket := fs.String("socket", client.DefaultSocket(), "the server's unix socket")
	base := fs.String("url", "", "the console's base URL as a browser reaches it (default: the server's first TCP listener)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitAirlock
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "airlock console: unexpected argument %q\n", fs.Arg(0))
		return exitAirlock
	}
	link, err := consoleLink(*socket, *base)
	if err != nil {
		return fail("console", err)
	}
	fmt.Println(link)
	fmt.Fprintln(os.Stderr, "one-time link, valid for 2 minutes; it logs the browser in as the local tenant")
	return 0
}

func consoleLink(socket, base string) (string, error) {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}}}
	resp, err := hc.Post("http://airlock/ui/links", "application/json", nil)
	if err != nil {
		return "", fmt.Errorf("ask %s for a login link: %w (is airlock serve running?): %w", socket, err, sandbox.ErrUnavailable)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("ask %s for a login link: %s: %s: %w", socket, resp.Status, strings.TrimSpace(string(body)), sandbox.ErrUnavailable)
	}
	var l struct{ Path, Base string }
	if err := json.Unmarshal(body, &l); err != nil {
		return "", fmt.Errorf("login link: %w", err)
	}
	if base == "" {
		base = l.Base
	}
	if base == "" {
		return "", fmt.Errorf("the server has no TCP listener (airlock serve --listen ADDR), and no --url was given: %w", sandbox.ErrInvalid)
	}
	return strings.TrimSuffix(base, "/") + l.Path, nil
}
