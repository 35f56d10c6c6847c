package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/egress"
	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

func init() {
	register(command{name: "run", short: "run a command inside a sandbox: airlock run [flags] -- CMD [ARGS]", run: runRun})
}

// runFlags are the `airlock run` flags; each has a policy equivalent and
// overrides it.
type runFlags struct {
	policyFile, profile, backend, workspace, workdir, rootfs string
	ro, rw, deny, tmpfs, env, allow                          listFlag
	network, memory, timeout, output                         string
	cpus                                                     float64
	pids, openFiles                                          int
	jsonOut                                                  bool
	resultFile, auditFile                                    string
	allowDegraded                                            bool
	writableConfig, caches                                   listFlag
	allowRequest                                             listFlag
	set                                                      map[string]bool // flags given on the command line
	session                                                  string
	endSession                                               bool
	sessionIdle                                              time.Duration
	verbose                                                  bool
	noCache                                                  bool
	dropped                                                  []string // PATH entries dropped with the hidden home
	image                                                    string
	// id names the sandbox (and its hold on the image); root is the
	// image held for the run, when there is one.
	id   string
	root *images.Rootfs
}

// runResult is what --json prints: a machine-readable summary.
type runResult struct {
	Sandbox         string  `json:"sandbox"`
	Backend         string  `json:"backend"`
	ExitCode        int     `json:"exit_code"`
	Signal          int     `json:"signal,omitempty"`
	TimedOut        bool    `json:"timed_out,omitempty"`
	OOM             bool    `json:"oom,omitempty"`
	OutputTruncated bool    `json:"output_truncated,omitempty"`
	DurationMS      float64 `json:"duration_ms"`
	MemoryPeakBytes int64   `json:"memory_peak_bytes"`
	Violations      int     `json:"violations"`
	// Denied are the writes a protection rule refused (distinct, at most
	// 100); DeniedTotal counts all of them.
	Denied      []policy.Denial `json:"denied,omitempty"`
	DeniedTotal int             `json:"denied_total,omitempty"`
	Egress      *egress.Stats   `json:"egress,omitempty"`
	Error       string          `json:"error,omitempty"`
}

func runRun(args []string) int {
	start := time.Now()
	var f runFlags
	fs := newFlagSet("run")
	f.register(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	f.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	argv := fs.Args()
	if f.session != "" || f.endSession {
		if f.session == "" {
			fmt.Fprintln(os.Stderr, "airlock run: --end needs --session NAME")
			return exitAirlock
		}
		if f.image != "" && !f.endSession {
			// Before a daemon starts (or the image is pulled for nothing).
			fmt.Fprintln(os.Stderr, "airlock run: "+errSessionImage)
			return exitAirlock
		}
		return runSession(fs, &f, argv, args[:len(args)-len(argv)])
	}
	if len(argv) == 0 && f.image == "" {
		fmt.Fprintln(os.Stderr, "airlock run: no command given (usage: airlock run [flags] -- CMD [ARGS])")
		return exitAirlock
	}
	f.id = newRunID()

	// Notified, a write to a closed stdout or stderr returns EPIPE instead
	// of killing airlock before it cleaned up (pipeWriter passes it on to
	// the command as SIGPIPE). It is in place for the whole run: the
	// command's first output can arrive, and its reader be gone, before
	// Exec returns, and the summary and result come after it. A handler,
	// not SIG_IGN, so that nothing started from here inherits an ignored
	// SIGPIPE.
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, syscall.SIGPIPE)
	defer signal.Stop(pipes)

	pol, err := f.policy()
	defer f.root.Release()
	if err != nil {
		return fail("run", err)
	}
	if f.root != nil {
		// Docker's rule: the image's entrypoint, then the command given
		// or else the image's.
		argv = f.root.Image.Config.Argv(argv)
		if len(argv) == 0 {
			return fail("run", fmt.Errorf("image %s has no entrypoint or command: give one (airlock run --image REF -- CMD): %w", f.image, sandbox.ErrInvalid))
		}
	}
	if err := checkRunHost(pol.Backend); err != nil {
		return fail("run", err)
	}
	if len(f.dropped) > 0 {
		adviseOnce(os.Stderr, pol.Filesystem.Workspace, homeAdvice(f.dropped), f.verbose)
	}
	res, code := runOnce(pol, f, argv, start)
	if code == exitNotFound && len(argv) > 0 {
		fmt.Fprint(os.Stderr, notFoundHint(argv[0], f.dropped))
	}
	f.writeResult(res)
	return code
}

// writeResult prints the JSON result with --json and writes it to
// --result.
func (f *runFlags) writeResult(res runResult) {
	if !f.jsonOut && f.resultFile == "" {
		return
	}
	b, _ := json.Marshal(res)
	if f.jsonOut {
		fmt.Fprintln(os.Stderr, string(b))
	}
	if f.resultFile != "" {
		if err := os.WriteFile(f.resultFile, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "airlock run: write result %q: %v\n", f.resultFile, err)
		}
	}
}

// register defines the flags of `airlock run` on fs.
func (f *runFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.policyFile, "policy", "", "policy `FILE` (YAML, version 1)")
	fs.StringVar(&f.profile, "profile", "", "built-in profile `NAME` (default, coding-agent, ...)")
	fs.StringVar(&f.backend, "backend", "", "isolation backend: native, gvisor, wasm, auto")
	fs.StringVar(&f.workspace, "workspace", "", "workspace `DIR`, mounted read-write (default: current directory; none)")
	fs.StringVar(&f.workdir, "workdir", "", "working `DIR` inside the sandbox")
	fs.StringVar(&f.rootfs, "rootfs", "", "use `DIR` as the root filesystem instead of the host's")
	fs.StringVar(&f.image, "image", "", "run in image `REF` of the image store (pulled when missing): its root (with a private writable layer), env, workdir, user and entrypoint/cmd; the workspace at /workspace")
	fs.Var(&f.ro, "ro", "make host `PATH` visible read-only (repeatable)")
	fs.Var(&f.rw, "rw", "make host `PATH` visible read-write (repeatable)")
	fs.Var(&f.deny, "deny", "make `PATH` inaccessible (repeatable)")
	fs.Var(&f.tmpfs, "tmpfs", "mount a private tmpfs at `PATH` (repeatable)")
	fs.Var(&f.env, "env", "set `K=V`, or pass host variable K (repeatable)")
	fs.StringVar(&f.network, "network", "", "network mode: none, allowlist, open")
	fs.Var(&f.allow, "allow", "allow egress to `HOST[:PORT]` or CIDR (repeatable; implies --network allowlist)")
	fs.Var(&f.allowRequest, "allow-request", "allow HTTP requests `'GET,HEAD HOST[:PORT]/PATH-GLOB [programs=PROG,...]'` (repeatable; * one segment, ** any; programs= limits it to those executables, paths or bare names; once a host has one, only matching requests pass; implies --network allowlist)")
	fs.StringVar(&f.memory, "memory", "", "memory limit (`SIZE`, e.g. 512Mi)")
	fs.Float64Var(&f.cpus, "cpus", 0, "CPU limit (`N` cores)")
	fs.IntVar(&f.pids, "pids", 0, "process limit")
	fs.IntVar(&f.openFiles, "open-files", 0, "open file limit")
	fs.StringVar(&f.timeout, "timeout", "", "wall-clock limit (`DURATION`, e.g. 30s)")
	fs.StringVar(&f.output, "output-limit", "", "stdout+stderr limit (`SIZE`)")
	fs.BoolVar(&f.jsonOut, "json", false, "print a JSON result (exit status, duration, peak memory, violations) on stderr")
	fs.StringVar(&f.resultFile, "result", "", "write the JSON result to `FILE`")
	fs.StringVar(&f.auditFile, "audit", "", "write audit events as JSON lines to `FILE` (- for stderr)")
	fs.BoolVar(&f.allowDegraded, "allow-degraded", false, "start even when a requested protection is unavailable (logged)")
	fs.Var(&f.writableConfig, "writable-config", "let the sandbox write protected config (git hooks and config, .envrc, editor and agent settings) below `DIR` (repeatable)")
	fs.StringVar(&f.session, "session", "", "run in the warm sandbox `NAME` kept for this directory, policy and flags (started by the first call)")
	fs.BoolVar(&f.verbose, "verbose", false, "print advice (such as PATH entries dropped with the hidden home) on every run, not once per workspace")
	fs.BoolVar(&f.endSession, "end", false, "with --session: end the session")
	fs.DurationVar(&f.sessionIdle, "session-idle", defaultSessionIdle, "with --session: end the session after `DURATION` without a command")
	fs.BoolVar(&f.noCache, "no-cache", false, "keep no tool cache between runs (the coding-agent profile keeps go, npm, pip and cargo's)")
	fs.Var(&f.caches, "cache", "keep tool cache `NAME` (go, npm, pip, cargo) between runs in airlock's own store (repeatable)")
}

// policy loads the policy (file or profile), layers the flags on top and
// resolves it against this process's environment.
func (f *runFlags) policy() (*policy.Policy, error) {
	var p *policy.Policy
	var err error
	switch {
	case f.policyFile != "" && f.profile != "":
		return nil, fmt.Errorf("--policy and --profile are exclusive (a policy file names its profile with `profile:`): %w", sandbox.ErrInvalid)
	case f.policyFile != "":
		p, err = policy.LoadFile(f.policyFile)
	default:
		name := f.profile
		if name == "" {
			name = "default"
		}
		p, err = policy.Profile(name)
	}
	if err != nil {
		return nil, err
	}
	if err := f.apply(p); err != nil {
		return nil, err
	}
	if ref := p.Filesystem.Image; ref != "" {
		f.image = ref
		if f.session != "" {
			return nil, fmt.Errorf("%s: %w", errSessionImage, sandbox.ErrInvalid)
		}
		if f.root, err = holdImage(context.Background(), ref, f.id); err != nil {
			return nil, err
		}
		if err := f.root.Apply(p); err != nil {
			return nil, err
		}
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("get working directory: %w", err)
	}
	home, _ := os.UserHomeDir()
	r, err := p.Resolve(policy.ResolveEnv{Cwd: cwd, Home: home, Environ: os.Environ(), UID: os.Getuid(), GID: os.Getgid(), GuardCwd: true})
	if err != nil {
		return nil, err
	}
	f.dropped = adjustToolchains(r)
	return r, nil
}

// apply layers flags over p: lists append, scalars override.
func (f *runFlags) apply(p *policy.Policy) error {
	fsp := &p.Filesystem
	if f.backend != "" {
		p.Backend = f.backend
	}
	if f.workspace != "" {
		fsp.Workspace = f.workspace
	}
	if f.rootfs != "" {
		fsp.Rootfs = f.rootfs
	}
	if f.image != "" {
		fsp.Image = f.image
	}
	if f.workdir != "" {
		p.Process.Workdir = f.workdir
	}
	fsp.ReadOnly = append(fsp.ReadOnly, f.ro...)
	fsp.ReadWrite = append(fsp.ReadWrite, f.rw...)
	fsp.Deny = append(fsp.Deny, f.deny...)
	fsp.Tmpfs = append(fsp.Tmpfs, f.tmpfs...)
	for _, e := range f.env {
		k, v, set := strings.Cut(e, "=")
		if k == "" {
			return fmt.Errorf("--env %q: empty variable name: %w", e, sandbox.ErrInvalid)
		}
		if set {
			if p.Process.Env == nil {
				p.Process.Env = map[string]string{}
			}
			p.Process.Env[k] = v
		} else {
			p.Process.EnvAllow = append(p.Process.EnvAllow, k)
		}
	}
	if f.network != "" {
		p.Network.Mode = f.network
	}
	if len(f.allow) > 0 {
		if f.network == "" {
			p.Network.Mode = policy.NetworkAllowlist
		}
		p.Network.Allow = append(p.Network.Allow, f.allow...)
	}
	for _, r := range f.allowRequest {
		rule, err := policy.ParseRequestRule(r)
		if err != nil {
			return fmt.Errorf("--allow-request: %w", err)
		}
		if f.network == "" && p.Network.Mode != policy.NetworkOpen {
			p.Network.Mode = policy.NetworkAllowlist
		}
		p.Network.Requests = append(p.Network.Requests, rule)
	}
	if err := f.applyLimits(p); err != nil {
		return err
	}
	p.Filesystem.WritableConfig = append(p.Filesystem.WritableConfig, f.writableConfig...)
	if f.noCache {
		if len(f.caches) > 0 {
			return fmt.Errorf("--no-cache and --cache are exclusive: %w", sandbox.ErrInvalid)
		}
		p.Caches = nil
	}
	p.Caches = append(p.Caches, f.caches...)
	if f.auditFile != "" {
		p.Audit.File = f.auditFile
	}
	if f.allowDegraded {
		p.AllowDegraded = true
	}
	return nil
}

// applyLimits layers the limit flags over p's limits.
func (f *runFlags) applyLimits(p *policy.Policy) error {
	if f.memory != "" {
		n, err := policy.ParseByteSize(f.memory)
		if err != nil {
			return fmt.Errorf("--memory: %w", err)
		}
		p.Limits.Memory = n
	}
	if f.output != "" {
		n, err := policy.ParseByteSize(f.output)
		if err != nil {
			return fmt.Errorf("--output-limit: %w", err)
		}
		p.Limits.OutputBytes = n
	}
	if f.timeout != "" {
		d, err := policy.ParseDuration(f.timeout)
		if err != nil {
			return fmt.Errorf("--timeout: %w", err)
		}
		p.Limits.Timeout = d
	}
	// An explicit 0 means no limit (and removes the profile's).
	if f.set["cpus"] {
		p.Limits.CPUs = f.cpus
		if f.cpus == 0 {
			p.Limits.CPUs = policy.Unlimited
		}
	}
	if f.set["pids"] {
		p.Limits.Pids = f.pids
		if f.pids == 0 {
			p.Limits.Pids = policy.Unlimited
		}
	}
	if f.set["open-files"] {
		p.Limits.OpenFiles = f.openFiles
		if f.openFiles == 0 {
			p.Limits.OpenFiles = policy.Unlimited
		}
	}
	return nil
}

// runSandbox is create + exec + destroy. It returns the result and the exit
// code: the command's, or 125/126/127 when airlock or the exec failed.
func runOnce(pol *policy.Policy, f runFlags, argv []string, start time.Time) (runResult, int) {
	res := runResult{Sandbox: f.id}
	if res.Sandbox == "" {
		res.Sandbox = newRunID()
	}
	failRes := func(err error) (runResult, int) {
		res.Error = err.Error()
		res.DurationMS = ms(time.Since(start))
		res.ExitCode = fail("run", err)
		return res, res.ExitCode
	}
	log := newLogger()

	sink, closeAuditFile, err := openAudit(pol.Audit.File)
	if err != nil {
		return failRes(err)
	}
	closeAudit := sync.OnceValue(closeAuditFile)
	defer closeAudit()
	// An audit trail that could not be written is airlock's failure, even
	// when the command succeeded: what it did is not on record.
	auditDone := func(res runResult, code int) (runResult, int) {
		if err := closeAudit(); err != nil {
			err = fmt.Errorf("audit file %q: %w", pol.Audit.File, err)
			fmt.Fprintf(os.Stderr, "airlock run: %v\n", err)
			res.Error = errors.Join(errorOrNil(res.Error), err).Error()
			return res, exitAirlock
		}
		return res, code
	}
	var live io.Writer
	if !term.IsTerminal(int(os.Stderr.Fd())) {
		live = os.Stderr // an agent reading its command's errors learns why
	}
	denials := newDenialLog(sink, live)
	counter := &audit.Counter{Next: denials}

	var imgs *images.Store // a docker backend loads the run's image from it
	if f.image != "" {
		if imgs, err = openImageStore(); err != nil {
			return failRes(err)
		}
	}
	b, err := openRunBackend(pol.Backend, pol.Isolation, f.image != "", imgs, log)
	if err != nil {
		return failRes(err)
	}
	res.Backend = b.Name()
	spec, eg, err := f.spec(res.Sandbox, pol, counter, log)
	if err != nil {
		return failRes(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sb, err := b.Create(ctx, spec)
	if err != nil {
		return failRes(fmt.Errorf("create sandbox: %w", err))
	}
	defer sb.Destroy(context.Background())

	st, err := execAttached(ctx, sb, argv)
	afterCommand(ctx, sb, argv, st, err, log)
	// The summary is only printed with --json or --result: without them,
	// reading the cgroup's figures would only delay the exit.
	if f.jsonOut || f.resultFile != "" {
		res.figures(ctx, sb, counter, eg)
	}
	if derr := sb.Destroy(context.Background()); derr != nil {
		log.Warn("destroy sandbox", "sandbox", res.Sandbox, "err", derr)
	}
	res.Denied, res.DeniedTotal = denials.Denials()
	if s := denials.summary(); s != "" {
		fmt.Fprint(os.Stderr, s)
	}
	res.DurationMS = ms(time.Since(start))
	code := res.exit(st, err)
	return auditDone(res, code)
}

// exit records how the command ended (or why the exec failed), says so
// on stderr where it was a limit, and returns the exit code.
func (res *runResult) exit(st sandbox.ExitStatus, err error) int {
	if err != nil {
		res.Error = err.Error()
		fmt.Fprintf(os.Stderr, "airlock run: %v\n", err)
		res.ExitCode = execExitCode(err)
		return res.ExitCode
	}
	res.ExitCode, res.Signal, res.TimedOut, res.OOM, res.OutputTruncated = st.Code, st.Signal, st.TimedOut, st.OOM, st.Truncated
	if st.TimedOut {
		fmt.Fprintln(os.Stderr, "airlock run: command killed at the wall-clock timeout")
	}
	if st.OOM {
		fmt.Fprintln(os.Stderr, "airlock run: command killed by the memory limit")
	}
	return st.Code
}

// errorOrNil turns a result's error text back into an error (nil for "").
func errorOrNil(s string) error {
	if s == "" {
		return nil
	}
	return errors.New(s)
}

// spec is the sandbox spec of a run: what the host adds (pinned files,
// caches, the git identity) and the egress proxy when the policy has a
// network.
func (f *runFlags) spec(id string, pol *policy.Policy, sink audit.Sink, log *slog.Logger) (sandbox.Spec, *egress.Proxy, error) {
	spec := sandbox.Spec{ID: id, Policy: pol, Audit: sink, Log: log, Pinned: f.pinned(pol)}
	if f.root != nil {
		spec.Image, spec.Root = f.image, f.root.SandboxRoot()
	}
	var err error
	if spec.Caches, err = cacheBinds(pol); err != nil {
		return spec, nil, err
	}
	if spec.Files, err = homeFiles(pol); err != nil {
		return spec, nil, err
	}
	eg, err := setupEgress(&spec, sink, log)
	return spec, eg, err
}

// afterCommand runs while the sandbox still stands after the command:
// the hints for paths outside its view when the command failed, and the
// write-back of an overlay.
func afterCommand(ctx context.Context, sb sandbox.Sandbox, argv []string, st sandbox.ExitStatus, err error, log *slog.Logger) {
	if err != nil || st.Code != 0 {
		fmt.Fprint(os.Stderr, outsideViewHints(ctx, sb, argv))
	}
	writeBack(ctx, sb, log)
}

// writeBack brings back what a backend held in an overlay (gVisor), through
// the same rules as every write.
func writeBack(ctx context.Context, sb sandbox.Sandbox, log *slog.Logger) {
	sy, ok := sb.(sandbox.Syncer)
	if !ok {
		return
	}
	rep, err := sy.Sync(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "airlock run: %v\n", err)
	}
	if len(rep.Conflicts) > 0 {
		fmt.Fprintf(os.Stderr, "airlock run: changed on the host during the run, kept as the host has them: %s\n", strings.Join(rep.Conflicts, ", "))
	}
	log.Debug("wrote back", "applied", rep.Applied, "denied", rep.Denied)
}

// figures fills in what --json reports of the sandbox's resource use.
func (res *runResult) figures(ctx context.Context, sb sandbox.Sandbox, counter *audit.Counter, eg *egress.Proxy) {
	if stats, err := sb.Stats(ctx); err == nil {
		res.MemoryPeakBytes = stats.MemoryPeakBytes
		res.Violations = stats.Violations
	}
	if v := counter.Count(audit.TypeViolation); v > res.Violations {
		res.Violations = v
	}
	if eg != nil {
		st := eg.Stats()
		res.Egress = &st
	}
}

// execAttached runs argv with this process's stdio, a PTY when stdin is a
// terminal, and forwards SIGINT/SIGTERM/SIGHUP to the command.
func execAttached(ctx context.Context, sb sandbox.Sandbox, argv []string) (sandbox.ExitStatus, error) {
	// A closed pipe on our stdout (airlock run ... | head) ends the
	// command as it would end outside: SIGPIPE.
	var p sandbox.Process
	var pmu sync.Mutex
	sigpipe := func() {
		pmu.Lock()
		defer pmu.Unlock()
		if p != nil {
			_ = p.Signal(ctx, int(syscall.SIGPIPE))
		}
	}
	req := sandbox.ExecRequest{Args: argv, Stdin: os.Stdin, Stdout: &pipeWriter{w: os.Stdout, closed: sigpipe}, Stderr: &pipeWriter{w: os.Stderr, closed: sigpipe}}
	term, err := attachTerminal(&req)
	if err != nil {
		return sandbox.ExitStatus{}, err
	}
	defer term.restore()
	pmu.Lock()
	var err2 error
	p, err2 = sb.Exec(ctx, req)
	if req.TTY && errors.Is(err2, sandbox.ErrNotSupported) {
		// The backend has no terminals (wasm): plain streams instead.
		term.restore()
		req.TTY, req.Stderr = false, os.Stderr
		p, err2 = sb.Exec(ctx, req)
	}
	pmu.Unlock()
	if err2 != nil {
		return sandbox.ExitStatus{}, err2
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case s := <-sigs:
				if err := p.Signal(ctx, int(s.(syscall.Signal))); errors.Is(err, sandbox.ErrNotSupported) {
					_ = sb.Destroy(context.Background()) // no signals (wasm): stop the command
				}
			case <-term.resized():
				rows, cols := term.size()
				_ = p.Resize(ctx, rows, cols)
			case <-done:
				return
			}
		}
	}()
	return p.Wait(ctx)
}

// openAudit opens the audit sink of path ("" none, "-" stderr); its close
// returns the sink's first write error (audit.JSONLines.Err), then the
// file's close error.
func openAudit(path string) (audit.Sink, func() error, error) {
	switch path {
	case "":
		return audit.Discard, func() error { return nil }, nil
	case "-":
		j := audit.NewJSONLines(os.Stderr)
		return j, j.Err, nil
	}
	fl, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open audit file: %w: %w", err, sandbox.ErrInvalid)
	}
	j := audit.NewJSONLines(fl)
	return j, func() error { return errors.Join(j.Err(), fl.Close()) }, nil
}

func newRunID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "run-" + hex.EncodeToString(b[:])
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
