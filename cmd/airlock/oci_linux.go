package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/backend/native/oci"
)

// `airlock oci ...` (and the binary invoked as airlock-runc) is a
// runc-compatible OCI runtime: what containerd's io.containerd.runc.v2
// shim (options.BinaryName) and dockerd (--add-runtime) call. Flags and
// output follow runc's; errors go to stderr and, as JSON lines, to --log.
func init() {
	register(command{name: "oci", short: "runc-compatible OCI runtime (for containerd, dockerd, Kubernetes RuntimeClass)", run: ociMain})
	register(command{name: oci.InitCommand, short: "OCI container init (internal)", hidden: true,
		run: func([]string) int { return oci.InitMain() }})
	register(command{name: oci.ExecInitCommand, short: "OCI exec init (internal)", hidden: true,
		run: func([]string) int { return oci.ExecInitMain() }})
	register(command{name: oci.MonitorCommand, short: "OCI container monitor (internal)", hidden: true,
		run: oci.MonitorMain})
	argv0Commands["airlock-runc"] = ociMain
}

// ociGlobal are runc's global flags.
type ociGlobal struct {
	root, log, logFormat string
	debug, systemd       bool
}

func ociMain(args []string) int {
	oci.CloseInheritedFDs()
	g, rest, code, ok := parseOCIGlobal(args)
	if !ok {
		return code
	}
	log, closeLog := ociLogger(g)
	defer closeLog()
	if len(rest) == 0 {
		fmt.Fprintln(os.Stderr, "usage: airlock oci [--root DIR] [--log FILE] [--log-format json] COMMAND [flags] ID\n\ncommands: create start state kill delete exec ps list features")
		return exitAirlock
	}
	c := &ociCmd{rt: &oci.Runtime{Root: g.root, Log: log}, ctx: context.Background(), log: log, name: rest[0], args: rest[1:]}
	c.sub = flag.NewFlagSet("airlock oci "+c.name, flag.ContinueOnError)
	c.sub.SetOutput(io.Discard)
	if g.systemd {
		return c.fail(errors.New("--systemd-cgroup is not supported: the airlock runtime manages cgroups itself (set SystemdCgroup = false)"))
	}
	switch c.name {
	case "update", "pause", "resume", "checkpoint", "restore", "events":
		return c.fail(fmt.Errorf("%s is not supported by the airlock runtime: the container keeps the limits and state it was created with", c.name))
	}
	run, ok := ociCommands[c.name]
	if !ok {
		return c.fail(fmt.Errorf("unknown command %q (see airlock oci)", c.name))
	}
	return run(c)
}

// parseOCIGlobal parses runc's global flags; on false the caller exits
// with code.
func parseOCIGlobal(args []string) (g ociGlobal, rest []string, code int, ok bool) {
	fs := flag.NewFlagSet("airlock oci", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&g.root, "root", oci.DefaultRoot, "state directory")
	fs.StringVar(&g.log, "log", "", "log file (errors as JSON lines with --log-format json)")
	fs.StringVar(&g.logFormat, "log-format", "text", "text or json")
	fs.BoolVar(&g.debug, "debug", false, "debug logging")
	fs.BoolVar(&g.systemd, "systemd-cgroup", false, "not supported: the runtime manages cgroups itself")
	fs.String("criu", "", "ignored")
	fs.String("rootless", "auto", "ignored (the runtime runs as root)")
	showVersion := fs.Bool("version", false, "print the version")
	fs.BoolVar(showVersion, "v", false, "print the version")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(os.Stderr, "airlock oci: %v\n", err)
		return g, nil, exitAirlock, false
	}
	if *showVersion {
		fmt.Print(oci.Version(version))
		return g, nil, 0, false
	}
	return g, fs.Args(), 0, true
}

// ociCmd is one runtime command being run: its name, its arguments and
// its flag set.
type ociCmd struct {
	rt   *oci.Runtime
	ctx  context.Context
	log  *slog.Logger
	name string
	args []string
	sub  *flag.FlagSet
}

// fail reports err as runc does and returns its exit code.
func (c *ociCmd) fail(err error) int {
	msg := err.Error()
	// The kinds' suffixes are for Airlock's own callers; runc's
	// callers match runc's wording, which comes first.
	c.log.Error(msg)
	fmt.Fprintln(os.Stderr, msg)
	return exitCode(err)
}

// needID parses the command's flags and returns its container id.
func (c *ociCmd) needID() (string, error) {
	if err := c.sub.Parse(c.args); err != nil {
		return "", err
	}
	if c.sub.NArg() < 1 {
		return "", fmt.Errorf("%s: a container id is required", c.name)
	}
	return c.sub.Arg(0), nil
}

// ociCommands are the runtime's commands, by runc's names.
var ociCommands = map[string]func(*ociCmd) int{
	"create": ociCreate, "run": ociCreate,
	"start": ociStart, "state": ociState, "list": ociList, "kill": ociKill,
	"delete": ociDelete, "exec": ociExec, "ps": ociPs,
	"features": func(*ociCmd) int { return ociJSON(oci.Features(version)) },
}

// ociCreate is create and run (create, start and wait unless --detach).
func ociCreate(c *ociCmd) int {
	var o oci.CreateOpts
	sub := c.sub
	sub.StringVar(&o.Bundle, "bundle", ".", "bundle directory")
	sub.StringVar(&o.Bundle, "b", ".", "bundle directory")
	sub.StringVar(&o.PidFile, "pid-file", "", "pid file")
	sub.StringVar(&o.ConsoleSocket, "console-socket", "", "console socket")
	sub.BoolVar(&o.NoPivot, "no-pivot", false, "move the root instead of pivot_root")
	sub.Bool("no-new-keyring", false, "ignored (keyctl is denied in containers)")
	detach := sub.Bool("detach", false, "run: do not wait for the container")
	sub.BoolVar(detach, "d", false, "run: do not wait for the container")
	preserve := sub.Int("preserve-fds", 0, "not supported")
	id, err := c.needID()
	if err != nil {
		return c.fail(err)
	}
	if *preserve > 0 {
		return c.fail(errors.New("--preserve-fds is not supported by the airlock runtime"))
	}
	wait := c.name == "run" && !*detach
	if wait {
		// The container's process becomes our child once create
		// exits its part: we wait for it as a shim would.
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return c.fail(err)
		}
		if o.PidFile == "" {
			o.PidFile = filepath.Join(os.TempDir(), "airlock-runc-"+strconv.Itoa(os.Getpid())+".pid")
			defer os.Remove(o.PidFile)
		}
	}
	if err := c.rt.Create(c.ctx, id, o); err != nil {
		return c.fail(err)
	}
	if c.name == "run" {
		if err := c.rt.Start(c.ctx, id); err != nil {
			_ = c.rt.Delete(c.ctx, id, true)
			return c.fail(err)
		}
	}
	if !wait {
		return 0
	}
	return ociWait(c.ctx, c.rt, id, o.PidFile)
}

func ociStart(c *ociCmd) int {
	id, err := c.needID()
	if err != nil {
		return c.fail(err)
	}
	if err := c.rt.Start(c.ctx, id); err != nil {
		return c.fail(err)
	}
	return 0
}

func ociState(c *ociCmd) int {
	id, err := c.needID()
	if err != nil {
		return c.fail(err)
	}
	st, err := c.rt.State(id)
	if err != nil {
		return c.fail(err)
	}
	return ociJSON(st)
}

func ociList(c *ociCmd) int {
	c.sub.String("format", "json", "json")
	c.sub.Bool("quiet", false, "")
	if err := c.sub.Parse(c.args); err != nil {
		return c.fail(err)
	}
	l, err := c.rt.List()
	if err != nil {
		return c.fail(err)
	}
	return ociJSON(l)
}

func ociKill(c *ociCmd) int {
	all := c.sub.Bool("all", false, "signal every process of the container")
	c.sub.BoolVar(all, "a", false, "signal every process of the container")
	id, err := c.needID()
	if err != nil {
		return c.fail(err)
	}
	sig := syscall.SIGTERM
	if s := c.sub.Arg(1); s != "" {
		if sig, err = parseSignal(s); err != nil {
			return c.fail(err)
		}
	}
	if err := c.rt.Kill(id, sig, *all); err != nil {
		return c.fail(err)
	}
	return 0
}

func ociDelete(c *ociCmd) int {
	force := c.sub.Bool("force", false, "kill a running container first")
	c.sub.BoolVar(force, "f", false, "kill a running container first")
	id, err := c.needID()
	if err != nil {
		return c.fail(err)
	}
	if err := c.rt.Delete(c.ctx, id, *force); err != nil {
		return c.fail(err)
	}
	return 0
}

func ociExec(c *ociCmd) int {
	var o oci.ExecOpts
	sub := c.sub
	sub.StringVar(&o.Process, "process", "", "process.json")
	sub.StringVar(&o.Process, "p", "", "process.json")
	sub.StringVar(&o.PidFile, "pid-file", "", "pid file")
	sub.StringVar(&o.ConsoleSocket, "console-socket", "", "console socket")
	sub.BoolVar(&o.Detach, "detach", false, "do not wait")
	sub.BoolVar(&o.Detach, "d", false, "do not wait")
	sub.BoolVar(&o.TTY, "tty", false, "allocate a terminal")
	sub.BoolVar(&o.TTY, "t", false, "allocate a terminal")
	sub.StringVar(&o.Cwd, "cwd", "", "working directory")
	var env multiFlag
	sub.Var(&env, "env", "KEY=VALUE")
	sub.Var(&env, "e", "KEY=VALUE")
	id, err := c.needID()
	if err != nil {
		return c.fail(err)
	}
	o.Env = env
	o.Args = sub.Args()[1:]
	code, err := c.rt.Exec(c.ctx, id, o)
	if err != nil {
		return c.fail(err)
	}
	return code
}

func ociPs(c *ociCmd) int {
	format := c.sub.String("format", "table", "table or json")
	c.sub.StringVar(format, "f", "table", "table or json")
	id, err := c.needID()
	if err != nil {
		return c.fail(err)
	}
	pids, err := c.rt.Ps(id)
	if err != nil {
		return c.fail(err)
	}
	if *format == "json" {
		return ociJSON(pids)
	}
	fmt.Println("PID")
	for _, p := range pids {
		fmt.Println(p)
	}
	return 0
}

// ociLogger writes to --log (JSON lines with runc's lowercase levels when
// --log-format json, which containerd's shim reads the last error from).
func ociLogger(g ociGlobal) (*slog.Logger, func()) {
	level := slog.LevelWarn
	if g.debug {
		level = slog.LevelDebug
	}
	var w io.Writer = io.Discard
	closeFn := func() {}
	if g.log != "" {
		f, err := os.OpenFile(g.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			w, closeFn = f, func() { f.Close() }
		}
	}
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		switch a.Key {
		case slog.LevelKey:
			a.Value = slog.StringValue(strings.ToLower(a.Value.String()))
		case slog.TimeKey:
			a.Value = slog.StringValue(a.Value.Time().Format(time.RFC3339Nano))
		}
		return a
	}}
	if g.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), closeFn
	}
	return slog.New(slog.NewTextHandler(w, opts)), closeFn
}

func ociJSON(v any) int {
	printJSON(v)
	return 0
}

// parseSignal takes a number or a name (TERM, SIGTERM), as runc does.
func parseSignal(s string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n <= 0 || n > 64 {
			return 0, fmt.Errorf("invalid signal %q", s)
		}
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, fmt.Errorf("unknown signal %q", s)
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// ociWait waits for a container the caller runs in the foreground (our
// child, as we are its subreaper), removes it and returns its status.
func ociWait(ctx context.Context, rt *oci.Runtime, id, pidFile string) int {
	b, err := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		_ = rt.Delete(ctx, id, true)
		return exitAirlock
	}
	var ws unix.WaitStatus
	for {
		if _, err := unix.Wait4(pid, &ws, 0, nil); !errors.Is(err, unix.EINTR) {
			break
		}
	}
	_ = rt.Delete(ctx, id, true)
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
