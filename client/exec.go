package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/airlock-dev/airlock/api"
)

// ExecOptions describes a command to run.
type ExecOptions struct {
	Args    []string
	Env     map[string]string
	Dir     string
	Timeout time.Duration
	// User runs the process as USER[:GROUP] (names from the sandbox's
	// /etc/passwd, or uid:gid); empty: the sandbox's user.
	User string
	// Stdin, when set, is streamed to the process. Stdout and Stderr
	// receive its output as it comes (nil discards).
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// Result is the outcome of Run.
type Result struct {
	api.ExitStatus
	Stdout, Stderr []byte
}

// Run runs args in sandbox id and returns its whole output (buffered on the
// server, bounded by its output limit: see Truncated).
func (c *Client) Run(ctx context.Context, id string, args ...string) (*Result, error) {
	return c.RunRequest(ctx, id, api.ExecRequest{Args: args})
}

// RunRequest is Run with every option of the API.
func (c *Client) RunRequest(ctx context.Context, id string, req api.ExecRequest) (*Result, error) {
	req.Background, req.Encoding = false, "base64"
	var r api.ExecResult
	if err := c.call(ctx, "POST", sbPath(id, "/exec"), nil, req, &r); err != nil {
		return nil, err
	}
	out, err := base64.StdEncoding.DecodeString(r.Stdout)
	if err != nil {
		return nil, fmt.Errorf("airlock: exec: stdout: %w", err)
	}
	errb, err := base64.StdEncoding.DecodeString(r.Stderr)
	if err != nil {
		return nil, fmt.Errorf("airlock: exec: stderr: %w", err)
	}
	return &Result{ExitStatus: r.ExitStatus, Stdout: out, Stderr: errb}, nil
}

// Exec runs a command, streaming its output to o.Stdout/o.Stderr as it
// comes and o.Stdin to it, and returns how it ended. Without Stdin it is one
// streamed request; with Stdin it starts a background process, streams
// stdin to it and follows its output.
func (c *Client) Exec(ctx context.Context, id string, o ExecOptions) (api.ExitStatus, error) {
	req := api.ExecRequest{Args: o.Args, Env: o.Env, Dir: o.Dir, Timeout: api.Duration(o.Timeout), User: o.User}
	if o.Stdin != nil {
		return c.execWithStdin(ctx, id, req, o)
	}
	b, err := json.Marshal(req)
	if err != nil {
		return api.ExitStatus{}, err
	}
	hr, err := c.request(ctx, "POST", sbPath(id, "/exec"), nil, bytes.NewReader(b))
	if err != nil {
		return api.ExitStatus{}, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/x-ndjson")
	resp, err := c.do(hr, http.StatusOK)
	if err != nil {
		return api.ExitStatus{}, err
	}
	defer resp.Body.Close()
	ex, _, err := readFrames(resp.Body, o.Stdout, o.Stderr)
	return ex, err
}

// readFrames copies NDJSON frames to stdout/stderr until an exit or error
// frame; it returns the exit status and the offset after the last chunk.
func readFrames(r io.Reader, stdout, stderr io.Writer) (api.ExitStatus, int64, error) {
	dec := json.NewDecoder(r)
	var off int64
	for {
		var f api.Frame
		if err := dec.Decode(&f); err != nil {
			if errors.Is(err, io.EOF) {
				return api.ExitStatus{}, off, errStreamEnded
			}
			return api.ExitStatus{}, off, fmt.Errorf("airlock: output stream: %w", err)
		}
		switch f.Type {
		case api.FrameStdout, api.FrameStderr:
			w := stdout
			if f.Type == api.FrameStderr {
				w = stderr
			}
			data := f.Data
			if f.Text != "" {
				data = []byte(f.Text)
			}
			if w != nil {
				if _, err := w.Write(data); err != nil {
					return api.ExitStatus{}, off, err
				}
			}
			off = f.Offset + int64(len(data))
		case api.FrameDropped:
			off = f.Offset
		case api.FrameExit:
			if f.Exit == nil {
				return api.ExitStatus{}, off, fmt.Errorf("airlock: exit frame without status")
			}
			return *f.Exit, off, nil
		case api.FrameError:
			info := api.ErrorInfo{Code: "stream"}
			if f.Error != nil {
				info = *f.Error
			}
			return api.ExitStatus{}, off, errorOf(0, info)
		}
	}
}

// errStreamEnded: the stream closed before its exit frame (not followed,
// or the connection broke).
var errStreamEnded = errors.New("airlock: output stream ended before the process exited")

func (c *Client) execWithStdin(ctx context.Context, id string, req api.ExecRequest, o ExecOptions) (api.ExitStatus, error) {
	req.Background, req.StdinStream = true, true
	p, err := c.start(ctx, id, req)
	if err != nil {
		return api.ExitStatus{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stdinErr := make(chan error, 1)
	go func() { stdinErr <- c.WriteStdin(ctx, id, p.ID, o.Stdin, true) }()
	ex, err := c.Output(ctx, id, p.ID, OutputOptions{Follow: true, Stdout: o.Stdout, Stderr: o.Stderr})
	if err != nil {
		return ex, err
	}
	// The process is done: forget it on the server.
	_ = c.Kill(ctx, id, p.ID)
	// A process may exit without reading all of its input: that is not an error.
	select {
	case <-stdinErr:
	default:
	}
	return ex, nil
}

// Start starts a background process; its output is kept (bounded) on the
// server for Output. With o.Stdin set, stdin is streamed from it.
func (c *Client) Start(ctx context.Context, id string, o ExecOptions) (*api.Process, error) {
	req := api.ExecRequest{Args: o.Args, Env: o.Env, Dir: o.Dir, Timeout: api.Duration(o.Timeout), User: o.User, Background: true}
	if o.Stdin != nil {
		req.StdinStream = true
	}
	p, err := c.start(ctx, id, req)
	if err != nil {
		return nil, err
	}
	if o.Stdin != nil {
		go c.WriteStdin(context.WithoutCancel(ctx), id, p.ID, o.Stdin, true)
	}
	return p, nil
}

func (c *Client) start(ctx context.Context, id string, req api.ExecRequest) (*api.Process, error) {
	var p api.Process
	if err := c.call(ctx, "POST", sbPath(id, "/exec"), nil, req, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

func procPath(id, pid string, rest string) string {
	return sbPath(id, "/processes/", url.PathEscape(pid), rest)
}

// Processes lists the background processes of sandbox id.
func (c *Client) Processes(ctx context.Context, id string) ([]api.Process, error) {
	var l api.ProcessList
	err := c.call(ctx, "GET", sbPath(id, "/processes"), nil, nil, &l)
	return l.Processes, err
}

// Process describes background process pid.
func (c *Client) Process(ctx context.Context, id, pid string) (*api.Process, error) {
	var p api.Process
	err := c.call(ctx, "GET", procPath(id, pid, ""), nil, nil, &p)
	return &p, err
}

// Signal sends sig to background process pid.
func (c *Client) Signal(ctx context.Context, id, pid string, sig int) error {
	return c.call(ctx, "POST", procPath(id, pid, "/signal"), nil, api.SignalRequest{Signal: sig}, nil)
}

// Kill kills background process pid and forgets it.
func (c *Client) Kill(ctx context.Context, id, pid string) error {
	return c.call(ctx, "DELETE", procPath(id, pid, ""), nil, nil, nil)
}

// Wait waits until background process pid exits.
func (c *Client) Wait(ctx context.Context, id, pid string) (api.ExitStatus, error) {
	var p api.Process
	if err := c.call(ctx, "POST", procPath(id, pid, "/wait"), nil, nil, &p); err != nil {
		return api.ExitStatus{}, err
	}
	if p.Exit == nil {
		return api.ExitStatus{}, fmt.Errorf("airlock: wait %s: no exit status", pid)
	}
	return *p.Exit, nil
}

// WriteStdin streams r to the stdin of background process pid (started
// with a Stdin); eof closes its stdin afterwards.
func (c *Client) WriteStdin(ctx context.Context, id, pid string, r io.Reader, eof bool) error {
	return c.send(ctx, "POST", procPath(id, pid, "/stdin"), url.Values{"eof": {strconv.FormatBool(eof)}}, r, "application/octet-stream")
}

// OutputOptions says which output of a background process to read.
type OutputOptions struct {
	Offset int64 // byte offset in the combined output to start from
	Follow bool  // wait for more until the process exits
	Stdout io.Writer
	Stderr io.Writer
}

// Output copies the buffered output of background process pid (and with
// Follow, new output until it exits) and returns its exit status. Without
// Follow, a running process gives an error wrapping ErrStillRunning.
// To reconnect after a broken stream, call again with Offset.
func (c *Client) Output(ctx context.Context, id, pid string, o OutputOptions) (api.ExitStatus, error) {
	q := url.Values{"offset": {fmt.Sprint(o.Offset)}}
	if o.Follow {
		q.Set("follow", "true")
	}
	body, err := c.stream(ctx, "GET", procPath(id, pid, "/output"), q, nil, "")
	if err != nil {
		return api.ExitStatus{}, err
	}
	defer body.Close()
	ex, _, err := readFrames(body, o.Stdout, o.Stderr)
	if errors.Is(err, errStreamEnded) {
		return ex, ErrStillRunning
	}
	return ex, err
}

// ErrStillRunning: Output without Follow reached the end of the buffered
// output of a process that still runs.
var ErrStillRunning = errors.New("airlock: process still running")

// StartProcess starts a background process with every option of the API
// (req.Background is implied): with StdinStream and no reader, its stdin
// stays open for WriteStdin calls until one passes eof.
func (c *Client) StartProcess(ctx context.Context, id string, req api.ExecRequest) (*api.Process, error) {
	req.Background = true
	return c.start(ctx, id, req)
}
