package microvm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/backend/microvm/guest"
	"github.com/airlock-dev/airlock/backend/microvm/internal/bootproto"
	"github.com/airlock-dev/airlock/internal/logtail"
	"github.com/airlock-dev/airlock/sandbox"
)

// fcDriver runs VMs with Firecracker (vsock channel, no shared
// directories). Untested on real hardware: see firecracker.go.
type fcDriver struct {
	bin   string
	agent string
}

func (d *fcDriver) Name() string { return VMMFirecracker }

func (d *fcDriver) Version(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, d.bin, "--version").Output()
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line, nil
}

const fcAPISock = "api.sock"

// Start runs firecracker in the jail, then configures and boots it (or
// loads m.Incoming with its RAM file m.MemFile) through its API.
func (d *fcDriver) Start(ctx context.Context, m *Machine) (VM, error) {
	var reqs []fcRequest
	if m.Incoming != "" {
		reqs = fcRestoreRequests(m.Incoming, m.MemFile)
	} else {
		var err error
		if reqs, err = fcBootRequests(m); err != nil {
			return nil, fmt.Errorf("%v: %w", err, sandbox.ErrNotSupported)
		}
	}
	cmd, cleanup, err := jailCommand(d.agent, d.bin, []string{"--api-sock", filepath.Join(m.Dir, fcAPISock), "--id", m.ID}, m, nil)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	v := &fcVM{m: m, cmd: cmd, done: make(chan struct{}), out: &logtail.Tail{Max: 16 << 10}}
	cmd.Stdout, cmd.Stderr = v.out, v.out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start firecracker: %v: %w", err, sandbox.ErrUnavailable)
	}
	go func() {
		v.waitErr = cmd.Wait()
		close(v.done)
	}()
	v.api = newFCClient(filepath.Join(m.Dir, fcAPISock))
	for _, r := range reqs {
		if err := v.api.do(ctx, r, v.done); err != nil {
			v.Kill()
			return nil, fmt.Errorf("firecracker: %w", err)
		}
	}
	return v, nil
}

// fcClient calls Firecracker's API on its unix socket.
type fcClient struct{ hc *http.Client }

func newFCClient(sock string) *fcClient {
	return &fcClient{hc: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}}
}

// do sends r, retrying while the socket does not exist yet; a non-2xx
// answer is an error carrying Firecracker's fault_message.
func (c *fcClient) do(ctx context.Context, r fcRequest, done <-chan struct{}) error {
	body, err := json.Marshal(r.Body)
	if err != nil {
		return err
	}
	for {
		req, err := http.NewRequestWithContext(ctx, r.Method, "http://localhost"+r.Path, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		resp, err := c.hc.Do(req)
		if err != nil {
			if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
				select {
				case <-ctx.Done():
					return errors.Join(err, ctx.Err(), sandbox.ErrTimeout)
				case <-done:
					return fmt.Errorf("firecracker exited: %w", sandbox.ErrUnavailable)
				case <-time.After(2 * time.Millisecond):
					continue
				}
			}
			return fmt.Errorf("%s %s: %w", r.Method, r.Path, err)
		}
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			var e struct {
				Fault string `json:"fault_message"`
			}
			json.Unmarshal(msg, &e)
			return fmt.Errorf("%s %s: %s: %s", r.Method, r.Path, resp.Status, bootproto.CleanMessage(e.Fault))
		}
		return nil
	}
}

// fcVM is one Firecracker process.
type fcVM struct {
	m       *Machine
	cmd     *exec.Cmd
	api     *fcClient
	done    chan struct{}
	waitErr error
	out     *logtail.Tail
}

func (v *fcVM) Pid() int              { return v.cmd.Process.Pid }
func (v *fcVM) Done() <-chan struct{} { return v.done }
func (v *fcVM) Output() string        { return v.out.String() }

// Channel connects to the guest's vsock port through Firecracker's host
// socket ("CONNECT port" / "OK ...").
func (v *fcVM) Channel(ctx context.Context) (net.Conn, error) {
	for {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", filepath.Join(v.m.Dir, fcVsockSock))
		if err == nil {
			if _, err = c.Write([]byte("CONNECT " + strconv.Itoa(guest.VsockPort) + "\n")); err == nil {
				line, rerr := bufio.NewReaderSize(&oneByteReader{c}, 1).ReadString('\n')
				if rerr == nil && strings.HasPrefix(line, "OK ") {
					return c, nil
				}
				err = fmt.Errorf("vsock connect: %q %v", line, rerr)
			}
			c.Close()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("agent channel: %w", errors.Join(err, ctx.Err(), sandbox.ErrTimeout))
		case <-v.done:
			return nil, fmt.Errorf("firecracker exited: %s: %w", lastLines(v.out.String(), 4), sandbox.ErrUnavailable)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// oneByteReader reads the CONNECT answer without reading past its line
// (what follows is the agent protocol).
type oneByteReader struct{ r io.Reader }

func (o *oneByteReader) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return o.r.Read(p)
}

func (v *fcVM) Resume(ctx context.Context) error {
	if v.m.Incoming != "" {
		return nil // loaded with resume_vm
	}
	return v.api.do(ctx, fcRequest{"PATCH", "/vm", fcState{State: "Resumed"}}, v.done)
}

// SaveState pauses the VM and writes its state to path and its memory to
// path + ".mem" (Firecracker keeps guest memory out of shared files).
func (v *fcVM) SaveState(ctx context.Context, path string) error {
	for _, r := range fcSnapshotRequests(path, path+".mem") {
		if err := v.api.do(ctx, r, v.done); err != nil {
			return err
		}
	}
	return nil
}

func (v *fcVM) Kill() {
	select {
	case <-v.done:
	default:
		v.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-v.done
}
