package mcptools

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

// Tool inputs. A field without omitempty is required; the jsonschema tag
// is the description the model reads.

type createIn struct {
	Env map[string]string `json:"env,omitempty" jsonschema:"environment variables added to every command and interpreter in the sandbox"`
}

type sandboxOut struct {
	SandboxID string `json:"sandbox_id"`
	Workdir   string `json:"workdir" jsonschema:"the working directory (and $HOME) of commands; the writable place for files"`
	ExpiresAt string `json:"expires_at,omitempty"`
	State     string `json:"state,omitempty"`
}

type listOut struct {
	Sandboxes []sandboxOut `json:"sandboxes"`
}

type idIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the id returned by create_sandbox"`
}

type commandIn struct {
	SandboxID      string            `json:"sandbox_id" jsonschema:"the id returned by create_sandbox"`
	Command        string            `json:"command" jsonschema:"a shell command line, run with /bin/sh -c"`
	Cwd            string            `json:"cwd,omitempty" jsonschema:"working directory (absolute, or relative to the sandbox's workdir)"`
	Env            map[string]string `json:"env,omitempty" jsonschema:"extra environment variables"`
	TimeoutSeconds int               `json:"timeout_seconds,omitempty" jsonschema:"kill the command after this many seconds (default 120)"`
	Background     bool              `json:"background,omitempty" jsonschema:"start it and return at once with a process_id (for servers and long jobs); read its output with get_process_output"`
}

type commandOut struct {
	ExitCode  int    `json:"exit_code"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	TimedOut  bool   `json:"timed_out,omitempty"`
	ProcessID string `json:"process_id,omitempty"`
}

type processIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the id returned by create_sandbox"`
	ProcessID string `json:"process_id" jsonschema:"the process_id returned by run_command with background=true"`
}

type processOut struct {
	Running  bool   `json:"running"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Output   string `json:"output" jsonschema:"stdout and stderr so far, interleaved (the latest part if long)"`
}

type codeIn struct {
	SandboxID      string `json:"sandbox_id" jsonschema:"the id returned by create_sandbox"`
	Code           string `json:"code" jsonschema:"the code cell; the value of its last expression is returned"`
	Language       string `json:"language,omitempty" jsonschema:"python (default) or javascript (if node is installed)"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"interrupt the cell after this many seconds (default 60); state is kept"`
}

type codeOut struct {
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	Result    string `json:"result,omitempty"`
	Error     string `json:"error,omitempty"`
	Traceback string `json:"traceback,omitempty"`
	Images    int    `json:"images,omitempty"`
	StateLost bool   `json:"state_lost,omitempty"`
}

type writeIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the id returned by create_sandbox"`
	Path      string `json:"path" jsonschema:"file path (absolute, or relative to the sandbox's workdir); parent directories are created"`
	Content   string `json:"content" jsonschema:"the file's content"`
	Encoding  string `json:"encoding,omitempty" jsonschema:"utf-8 (default) or base64 for binary content"`
}

type writeOut struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
}

type pathIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the id returned by create_sandbox"`
	Path      string `json:"path,omitempty" jsonschema:"absolute, or relative to the sandbox's workdir (default: the workdir)"`
}

type readOut struct {
	Path      string `json:"path"`
	Content   string `json:"content"`
	Encoding  string `json:"encoding"`
	Truncated bool   `json:"truncated,omitempty"`
}

type entry struct {
	Name string `json:"name"`
	Type string `json:"type"` // file, dir, link
	Size int64  `json:"size"`
}

type listFilesOut struct {
	Path    string  `json:"path"`
	Entries []entry `json:"entries"`
}

func (t *tools) register(s *mcp.Server) {
	reach := " " + t.reach()
	mcp.AddTool(s, &mcp.Tool{Name: "create_sandbox", Description: "Create an isolated Linux sandbox and return its sandbox_id and workdir. " +
		"Use one sandbox per task and reuse it across calls." + reach}, t.create)
	mcp.AddTool(s, &mcp.Tool{Name: "list_sandboxes", Description: "List the running sandboxes created through this server."}, t.list)
	mcp.AddTool(s, &mcp.Tool{Name: "destroy_sandbox", Description: "Destroy a sandbox and everything in it (processes, files). Idempotent."}, t.destroy)
	mcp.AddTool(s, &mcp.Tool{Name: "run_command", Description: "Run a shell command in a sandbox and return its exit code, stdout and stderr " +
		"(long output is cut to its first 64 KiB). With background=true it starts the command and returns a process_id at once." + reach}, t.runCommand)
	mcp.AddTool(s, &mcp.Tool{Name: "get_process_output", Description: "Return the output so far of a background process started by run_command, and whether it still runs."}, t.processOutput)
	mcp.AddTool(s, &mcp.Tool{Name: "run_code", Description: "Run a Python (default) or JavaScript cell in a sandbox's interpreter, which keeps " +
		"variables, imports and functions between calls (like a notebook). Returns stdout, stderr, the value of the last expression, " +
		"the traceback on error, and matplotlib figures as PNG images (call plt.show() or just leave figures open)." + reach}, t.runCode)
	mcp.AddTool(s, &mcp.Tool{Name: "write_file", Description: "Write a file in a sandbox (creating parent directories). Only the sandbox's workdir and /tmp are writable."}, t.writeFile)
	mcp.AddTool(s, &mcp.Tool{Name: "read_file", Description: "Read a file from a sandbox: text as UTF-8, PNG/JPEG as an image, other binary as base64 (at most 1 MiB)."}, t.readFile)
	mcp.AddTool(s, &mcp.Tool{Name: "list_files", Description: "List a directory in a sandbox (default: its workdir)."}, t.listFiles)
	t.registerBrowser(s)
	t.registerPorts(s)

	t.registerCheckpoints(s)
}

func (t *tools) create(ctx context.Context, _ *mcp.CallToolRequest, in createIn) (*mcp.CallToolResult, sandboxOut, error) {
	req := api.CreateSandboxRequest{Backend: t.cfg.Backend, Profile: t.cfg.Profile, Image: t.cfg.Image, Timeout: api.Duration(t.cfg.Timeout),
		Labels: map[string]string{Label: t.cfg.Instance}, Env: in.Env}
	pol := map[string]any{}
	if len(t.cfg.Allow) > 0 {
		pol["network"] = map[string]any{"mode": "allowlist", "allow": t.cfg.Allow}
	}
	limits := map[string]any{}
	if t.cfg.Memory != "" {
		limits["memory"] = t.cfg.Memory
	}
	if t.cfg.Disk != "" {
		limits["disk"] = t.cfg.Disk
	}
	if len(limits) > 0 {
		pol["limits"] = limits
	}
	if len(pol) > 0 {
		b, err := json.Marshal(pol)
		if err != nil {
			return nil, sandboxOut{}, err
		}
		req.Policy = b
	}
	sb, err := t.cfg.Client.Create(ctx, req)
	if err != nil {
		return nil, sandboxOut{}, explain("create_sandbox", err, "")
	}
	t.workdirs.Store(sb.ID, sb.Workdir)
	return nil, view(sb), nil
}

func view(sb *api.Sandbox) sandboxOut {
	out := sandboxOut{SandboxID: sb.ID, Workdir: sb.Workdir, State: sb.State}
	if !sb.ExpiresAt.IsZero() {
		out.ExpiresAt = sb.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return out
}

func (t *tools) list(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, listOut, error) {
	sbs, err := t.cfg.Client.List(ctx, client.ListOptions{Labels: map[string]string{Label: t.cfg.Instance}})
	if err != nil {
		return nil, listOut{}, explain("list_sandboxes", err, "")
	}
	out := listOut{Sandboxes: []sandboxOut{}}
	for i := range sbs {
		out.Sandboxes = append(out.Sandboxes, view(&sbs[i]))
	}
	return nil, out, nil
}

func (t *tools) destroy(ctx context.Context, _ *mcp.CallToolRequest, in idIn) (*mcp.CallToolResult, sandboxOut, error) {
	if err := t.owned(ctx, in.SandboxID); err != nil {
		return nil, sandboxOut{}, explain("destroy_sandbox", err, "")
	}
	if err := t.cfg.Client.Delete(ctx, in.SandboxID); err != nil {
		return nil, sandboxOut{}, explain("destroy_sandbox", err, "")
	}
	t.workdirs.Delete(in.SandboxID)
	return nil, sandboxOut{SandboxID: in.SandboxID, State: "stopped"}, nil
}

// owned checks that id is a sandbox of this MCP server (any other, even of
// the same tenant, is "not found" here) and returns nil if so.
func (t *tools) owned(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("sandbox_id is empty: %w", errMissing)
	}
	sb, err := t.cfg.Client.Get(ctx, id)
	if err != nil {
		return err
	}
	if sb.Labels[Label] != t.cfg.Instance {
		return fmt.Errorf("sandbox %q: not created through this MCP server: %w", id, errNotOurs)
	}
	t.workdirs.Store(id, sb.Workdir)
	return nil
}

// resolve makes p absolute: relative paths are under the sandbox's workdir.
func (t *tools) resolve(ctx context.Context, id, p string) (string, error) {
	if wd, ok := t.workdirs.Load(id); !ok || p == "" || !strings.HasPrefix(p, "/") {
		if !ok {
			if err := t.owned(ctx, id); err != nil {
				return "", err
			}
			wd, _ = t.workdirs.Load(id)
		}
		if p == "" {
			return wd.(string), nil
		}
		if !strings.HasPrefix(p, "/") {
			return path.Join(wd.(string), p), nil
		}
	}
	return p, nil
}

func (t *tools) runCommand(ctx context.Context, _ *mcp.CallToolRequest, in commandIn) (*mcp.CallToolResult, commandOut, error) {
	const op = "run_command"
	if strings.TrimSpace(in.Command) == "" {
		return nil, commandOut{}, explain(op, fmt.Errorf("command is empty: %w", errMissing), "")
	}
	dir := ""
	if in.Cwd != "" {
		var err error
		if dir, err = t.resolve(ctx, in.SandboxID, in.Cwd); err != nil {
			return nil, commandOut{}, explain(op, err, "")
		}
	} else if _, err := t.resolve(ctx, in.SandboxID, ""); err != nil {
		return nil, commandOut{}, explain(op, err, "")
	}
	timeout := 120 * time.Second
	if in.TimeoutSeconds > 0 {
		timeout = time.Duration(in.TimeoutSeconds) * time.Second
	}
	req := api.ExecRequest{Args: []string{"/bin/sh", "-c", in.Command}, Env: in.Env, Dir: dir, Timeout: api.Duration(timeout)}
	if in.Background {
		p, err := t.cfg.Client.Start(ctx, in.SandboxID, client.ExecOptions{Args: req.Args, Env: req.Env, Dir: req.Dir, Timeout: timeout})
		if err != nil {
			return nil, commandOut{}, explain(op, err, hintCommand)
		}
		out := commandOut{ProcessID: p.ID}
		return text(fmt.Sprintf("started in the background as process %s (pid %d); read its output with get_process_output", p.ID, p.PID)), out, nil
	}
	res, err := t.cfg.Client.RunRequest(ctx, in.SandboxID, req)
	if err != nil {
		return nil, commandOut{}, explain(op, err, hintCommand)
	}
	out := commandOut{ExitCode: res.Code, Stdout: clip(res.Stdout), Stderr: clip(res.Stderr), TimedOut: res.TimedOut}
	var b strings.Builder
	fmt.Fprintf(&b, "exit code %d", res.Code)
	if res.TimedOut {
		fmt.Fprintf(&b, " (killed after the %s timeout: pass a larger timeout_seconds, or background=true)", timeout)
	}
	if res.OOM {
		b.WriteString(" (killed by the sandbox's memory limit)")
	}
	fmt.Fprintf(&b, "\n--- stdout ---\n%s\n--- stderr ---\n%s", out.Stdout, out.Stderr)
	return text(b.String()), out, nil
}

func (t *tools) processOutput(ctx context.Context, _ *mcp.CallToolRequest, in processIn) (*mcp.CallToolResult, processOut, error) {
	const op = "get_process_output"
	if err := t.owned(ctx, in.SandboxID); err != nil {
		return nil, processOut{}, explain(op, err, "")
	}
	p, err := t.cfg.Client.Process(ctx, in.SandboxID, in.ProcessID)
	if err != nil {
		return nil, processOut{}, explain(op, err, "Check process_id: it is the one run_command returned with background=true.")
	}
	var buf tailBuffer
	if _, err := t.cfg.Client.Output(ctx, in.SandboxID, in.ProcessID, client.OutputOptions{Stdout: &buf, Stderr: &buf}); err != nil && !errors.Is(err, client.ErrStillRunning) {
		return nil, processOut{}, explain(op, err, "")
	}
	out := processOut{Running: p.Running, Output: buf.String()}
	if p.Exit != nil {
		code := p.Exit.Code
		out.ExitCode = &code
	}
	return nil, out, nil
}

func (t *tools) runCode(ctx context.Context, _ *mcp.CallToolRequest, in codeIn) (*mcp.CallToolResult, codeOut, error) {
	const op = "run_code"
	if err := t.owned(ctx, in.SandboxID); err != nil {
		return nil, codeOut{}, explain(op, err, "")
	}
	timeout := time.Duration(in.TimeoutSeconds) * time.Second
	r, err := t.cfg.Client.RunCode(ctx, in.SandboxID, in.Code, client.CodeOptions{Language: in.Language, Timeout: timeout})
	if err != nil {
		return nil, codeOut{}, explain(op, err, "If the interpreter is missing, use run_command with another language, or language=python.")
	}
	out := codeOut{Stdout: clip([]byte(r.Stdout)), Stderr: clip([]byte(r.Stderr)), Images: len(r.Images), StateLost: r.StateLost}
	var b strings.Builder
	if r.NewInterpreter && r.ExecutionCount > 1 {
		b.WriteString("[a new interpreter was started: variables from earlier calls are gone]\n")
	}
	if out.Stdout != "" {
		fmt.Fprintf(&b, "--- stdout ---\n%s\n", out.Stdout)
	}
	if out.Stderr != "" {
		fmt.Fprintf(&b, "--- stderr ---\n%s\n", out.Stderr)
	}
	if r.Result != nil {
		out.Result = clip([]byte(*r.Result))
		fmt.Fprintf(&b, "--- result ---\n%s\n", out.Result)
	}
	if r.Error != nil {
		out.Error = r.Error.Name + ": " + r.Error.Value
		out.Traceback = clip([]byte(r.Error.Traceback))
		fmt.Fprintf(&b, "--- error ---\n%s\n", out.Error)
		if out.Traceback != "" {
			fmt.Fprintf(&b, "%s\n", out.Traceback)
		}
	}
	if r.StateLost {
		b.WriteString("[the interpreter is gone: the next run_code starts a fresh one]\n")
	}
	if b.Len() == 0 {
		b.WriteString("(no output)")
	}
	res := text(b.String())
	for _, im := range r.Images {
		res.Content = append(res.Content, &mcp.ImageContent{Data: im.Data, MIMEType: "image/png"})
	}
	// A cell that raised is still a successful tool call: the model reads
	// the traceback and fixes its code.
	return res, out, nil
}

func (t *tools) writeFile(ctx context.Context, _ *mcp.CallToolRequest, in writeIn) (*mcp.CallToolResult, writeOut, error) {
	const op = "write_file"
	p, err := t.resolve(ctx, in.SandboxID, in.Path)
	if err != nil {
		return nil, writeOut{}, explain(op, err, "")
	}
	if in.Path == "" {
		return nil, writeOut{}, explain(op, fmt.Errorf("path is empty: %w", errMissing), "")
	}
	data := []byte(in.Content)
	switch in.Encoding {
	case "", "utf-8", "utf8", "text":
	case "base64":
		if data, err = base64.StdEncoding.DecodeString(in.Content); err != nil {
			return nil, writeOut{}, explain(op, fmt.Errorf("content is not valid base64: %v: %w", err, errMissing), "")
		}
	default:
		return nil, writeOut{}, explain(op, fmt.Errorf("encoding %q: want utf-8 or base64: %w", in.Encoding, errMissing), "")
	}
	if err := t.cfg.Client.WriteFile(ctx, in.SandboxID, p, bytes.NewReader(data), 0o644); err != nil {
		return nil, writeOut{}, explain(op, err, hintWrite)
	}
	return nil, writeOut{Path: p, Bytes: len(data)}, nil
}

func (t *tools) readFile(ctx context.Context, _ *mcp.CallToolRequest, in pathIn) (*mcp.CallToolResult, readOut, error) {
	const op = "read_file"
	if in.Path == "" {
		return nil, readOut{}, explain(op, fmt.Errorf("path is empty: %w", errMissing), "")
	}
	p, err := t.resolve(ctx, in.SandboxID, in.Path)
	if err != nil {
		return nil, readOut{}, explain(op, err, "")
	}
	rc, err := t.cfg.Client.ReadFile(ctx, in.SandboxID, p)
	if err != nil {
		return nil, readOut{}, explain(op, err, "Check the path with list_files.")
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxFileRead+1))
	if err != nil {
		return nil, readOut{}, explain(op, err, "")
	}
	out := readOut{Path: p, Truncated: len(data) > maxFileRead}
	if out.Truncated {
		data = data[:maxFileRead]
	}
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) && !out.Truncated:
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: p + " (PNG image)"}, &mcp.ImageContent{Data: data, MIMEType: "image/png"}}},
			readOut{Path: p, Encoding: "image/png"}, nil
	case bytes.HasPrefix(data, []byte("\xff\xd8\xff")) && !out.Truncated:
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: p + " (JPEG image)"}, &mcp.ImageContent{Data: data, MIMEType: "image/jpeg"}}},
			readOut{Path: p, Encoding: "image/jpeg"}, nil
	case utf8.Valid(data) || (out.Truncated && utf8.Valid(trimPartialRune(data))):
		out.Content, out.Encoding = string(trimPartialRune(data)), "utf-8"
	default:
		out.Content, out.Encoding = base64.StdEncoding.EncodeToString(data), "base64"
	}
	return nil, out, nil
}

func (t *tools) listFiles(ctx context.Context, _ *mcp.CallToolRequest, in pathIn) (*mcp.CallToolResult, listFilesOut, error) {
	const op = "list_files"
	p, err := t.resolve(ctx, in.SandboxID, in.Path)
	if err != nil {
		return nil, listFilesOut{}, explain(op, err, "")
	}
	files, err := t.cfg.Client.ListDir(ctx, in.SandboxID, p)
	if err != nil {
		return nil, listFilesOut{}, explain(op, err, "Check the path: list its parent directory.")
	}
	out := listFilesOut{Path: p, Entries: []entry{}}
	for i, f := range files {
		if i == maxEntries {
			out.Entries = append(out.Entries, entry{Name: fmt.Sprintf("... %d more", len(files)-maxEntries), Type: "note"})
			break
		}
		e := entry{Name: f.Name, Size: f.Size, Type: "file"}
		switch {
		case f.IsDir:
			e.Type = "dir"
		case f.Link != "":
			e.Type = "link"
		}
		out.Entries = append(out.Entries, e)
	}
	return nil, out, nil
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// clip bounds output handed to the model, keeping it valid UTF-8.
func clip(b []byte) string {
	if len(b) <= maxTextOut {
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	return strings.ToValidUTF8(string(b[:maxTextOut]), "\uFFFD") + fmt.Sprintf("\n[... %d more bytes cut]", len(b)-maxTextOut)
}

func trimPartialRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		if utf8.Valid(b) {
			return b
		}
		b = b[:len(b)-1]
	}
	return b
}

// tailBuffer keeps the last maxTextOut bytes written.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > maxTextOut {
		t.b = append([]byte(nil), t.b[len(t.b)-maxTextOut:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return strings.ToValidUTF8(string(t.b), "\uFFFD") }
