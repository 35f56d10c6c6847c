package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ociRuntimeCheck is what `airlock doctor` found about one daemon's
// registration of the airlock OCI runtime.
type ociRuntimeCheck struct {
	Daemon     string `json:"daemon"`
	Endpoint   string `json:"endpoint"`
	Registered bool   `json:"registered"`
	Path       string `json:"path,omitempty"`
	// ThisBinary: the registered path is this airlock binary (through any
	// link named airlock-runc).
	ThisBinary bool   `json:"this_binary"`
	Problem    string `json:"problem,omitempty"`
}

// checkDockerRuntime asks a Docker daemon (its API over a unix socket)
// which runtimes it has and whether "airlock" is this binary.
func checkDockerRuntime(ctx context.Context, host string) ociRuntimeCheck {
	if host == "" {
		host = os.Getenv("DOCKER_HOST")
	}
	if host == "" {
		host = "unix:///var/run/docker.sock"
	}
	c := ociRuntimeCheck{Daemon: "docker", Endpoint: host}
	sock, ok := strings.CutPrefix(host, "unix://")
	if !ok {
		c.Problem = "only unix:// Docker hosts are checked"
		return c
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/v1.41/info", nil)
	if err != nil {
		c.Problem = err.Error()
		return c
	}
	resp, err := hc.Do(req)
	if err != nil {
		c.Problem = "no Docker daemon: " + err.Error()
		return c
	}
	defer resp.Body.Close()
	var info struct {
		Runtimes map[string]struct {
			Path string `json:"path"`
		} `json:"Runtimes"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&info); err != nil {
		c.Problem = "docker info: " + err.Error()
		return c
	}
	rt, ok := info.Runtimes["airlock"]
	if !ok {
		c.Problem = `runtime "airlock" not registered: start dockerd with --add-runtime airlock=/usr/local/bin/airlock-runc, or add it under "runtimes" in /etc/docker/daemon.json (see docs/oci.md)`
		return c
	}
	c.Registered, c.Path = true, rt.Path
	c.ThisBinary, c.Problem = isThisBinary(rt.Path)
	return c
}

// isThisBinary reports whether a runtime path (absolute, or a name on
// PATH) is this airlock binary invoked as airlock-runc.
func isThisBinary(p string) (bool, string) {
	if !filepath.IsAbs(p) {
		found, err := lookPathHost(p)
		if err != nil {
			return false, fmt.Sprintf("%s is not on PATH", p)
		}
		p = found
	}
	if filepath.Base(p) != "airlock-runc" {
		return false, fmt.Sprintf("%s: the binary must be invoked as airlock-runc (a link or copy of that name)", p)
	}
	self, err := os.Executable()
	if err != nil {
		return false, err.Error()
	}
	a, err1 := os.Stat(p)
	b, err2 := os.Stat(self)
	if err1 != nil || err2 != nil {
		return false, fmt.Sprintf("%s: cannot compare with this binary", p)
	}
	if !os.SameFile(a, b) {
		return false, fmt.Sprintf("%s is not this airlock binary (%s): another version answers for the runtime", p, self)
	}
	return true, ""
}

func lookPathHost(name string) (string, error) {
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}

func printRuntimeChecks(cs []ociRuntimeCheck) {
	if len(cs) == 0 {
		return
	}
	fmt.Println("\noci runtime (airlock-runc):")
	for _, c := range cs {
		state := "registered -> " + c.Path
		if c.ThisBinary {
			state += " (this binary)"
		}
		if c.Problem != "" {
			state = "PROBLEM: " + c.Problem
			if c.Registered {
				state = "registered -> " + c.Path + ": " + c.Problem
			}
		}
		fmt.Printf("  %-8s %s\n           %s\n", c.Daemon, c.Endpoint, state)
	}
}
