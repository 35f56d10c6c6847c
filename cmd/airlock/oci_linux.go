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
	fs := flag.NewFlagSet("airlock oci", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var g ociGlobal
	fs.StringVar(&g.root, "root", oci.DefaultRoot, "state directory")
	fs.StringVar(&g.log, "log", "", "log file (errors as JSON lines with --log-format json)")
	fs.StringVar(&g.logFormat, "log-format", "text", "text or json")
	fs.BoolVar(&g.debug, "debug", false, "debug logging")
	fs.BoolVar(&g.systemd, "systemd-cgroup", false, "not supported: the runtime manages cgroups itself")
	fs.String("criu", "", "ignored")
	rootless := fs.String("rootless", "auto", "ignored (the runtime runs as root)")
	showVersion := fs.Bool("version", false, "print the version")
	fs.BoolVar(showVersion, "v", false, "print the version")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(os.Stderr, "airlock oci: %v\n", err)
		return exitAirlock
	}
	_ = rootless
	if *showVersion {
		fmt.Print(oci.Version(version))
		return 0
	}
	log, closeLog := ociLogger(g)
	defer closeLog()
	rest := fs.Args()
	if len(rest) == 0 {
		fmt.Fprintln(os.Stderr, "usage: airlock oci [--root DIR] [--log FILE] [--log-format json] COMMAND [flags] ID\n\ncommands: create start state kill delete exec ps list features")
		return exitAirlock
	}
	fail := func(err error) int {
		msg := err.Error()
		// The kinds' suffixes are for Airlock's own callers; runc's
		// callers match runc's wording, which comes first.
		log.Error(msg)
		fmt.Fprintln(os.Stderr, msg)
		return exitCode(err)
	}
	if g.systemd {
		return fail(errors.New("--systemd-cgroup is not supported: the airlock runtime manages cgroups itself (set SystemdCgroup = false)"))
	}
	rt := &oci.Runtime{Root: g.root, Log: log}
	ctx := context.Background()
	cmd, cargs := rest[0], rest[1:]
	sub := flag.NewFlagSet("airlock oci "+cmd, flag.ContinueOnError)
	sub.SetOutput(io.Discard)
	needID := func() (string, error) {
		if err := sub.Parse(cargs); err != nil {
			return "", err
		}
		if sub.NArg() < 1 {
			return "", fmt.Errorf("%s: a container id is required", cmd)
		}
		return sub.Arg(0), nil
	}
	switch cmd {
	case "create", "run":
		var o oci.CreateOpts
		sub.StringVar(&o.Bundle, "bundle", ".", "bundle directory")
		sub.StringVar(&o.Bundle, "b", ".", "bundle directory")
		sub.StringVar(&o.PidFile, "pid-file", "", "pid file")
		sub.StringVar(&o.ConsoleSocket, "console-socket", "", "console socket")
		sub.BoolVar(&o.NoPivot, "no-pivot", false, "move the root instead of pivot_root")
		sub.Bool("no-new-keyring", false, "ignored (keyctl is denied in containers)")
		detach := sub.Bool("detach", false, "run: do not wait for the container")
		sub.BoolVar(detach, "d", false, "run: do not wait for the container")
		preserve := sub.Int("preserve-fds", 0, "not supported")
		id, err := needID()
		if err != nil {
			return fail(err)
		}
		if *preserve > 0 {
			return fail(errors.New("--preserve-fds is not supported by the airlock runtime"))
		}
		wait := cmd == "run" && !*detach
		if wait {
			// The container's process becomes our child once create
			// exits its part: we wait for it as a shim would.
			if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
				return fail(err)
			}
			if o.PidFile == "" {
				o.PidFile = filepath.Join(os.TempDir(), "airlock-runc-"+strconv.Itoa(os.Getpid())+".pid")
				defer os.Remove(o.PidFile)
			}
		}
		if err := rt.Create(ctx, id, o); err != nil {
			return fail(err)
		}
		if cmd == "run" {
			if err := rt.Start(ctx, id); err != nil {
				_ = rt.Delete(ctx, id, true)
				return fail(err)
			}
		}
		if !wait {
			return 0
		}
		return ociWait(ctx, rt, id, o.PidFile)
	case "start":
		id, err := needID()
		if err != nil {
			return fail(err)
		}
		if err := rt.Start(ctx, id); err != nil {
			return fail(err)
		}
		return 0
	case "state":
		id, err := needID()
		if err != nil {
			return fail(err)
		}
		st, err := rt.State(id)
		if err != nil {
			return fail(err)
		}
		return ociJSON(st)
	case "list":
		sub.String("format", "json", "json")
		sub.Bool("quiet", false, "")
		if err := sub.Parse(cargs); err != nil {
			return fail(err)
		}
		l, err := rt.List()
		if err != nil {
			return fail(err)
		}
		return ociJSON(l)
	case "kill":
		all := sub.Bool("all", false, "signal every process of the container")
		sub.BoolVar(all, "a", false, "signal every process of the container")
		id, err := needID()
		if err != nil {
			return fail(err)
		}
		sig := syscall.SIGTERM
		if s := sub.Arg(1); s != "" {
			if sig, err = parseSignal(s); err != nil {
				return fail(err)
			}
		}
		if err := rt.Kill(id, sig, *all); err != nil {
			return fail(err)
		}
		return 0
	case "delete":
		force := sub.Bool("force", false, "kill a running container first")
		sub.BoolVar(force, "f", false, "kill a running container first")
		id, err := needID()
		if err != nil {
			return fail(err)
		}
		if err := rt.Delete(ctx, id, *force); err != nil {
			return fail(err)
		}
		return 0
	case "exec":
		var o oci.ExecOpts
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
		id, err := needID()
		if err != nil {
			return fail(err)
		}
		o.Env = env
		o.Args = sub.Args()[1:]
		code, err := rt.Exec(ctx, id, o)
		if err != nil {
			return fail(err)
		}
		return code
	case "ps":
		format := sub.String("format", "table", "table or json")
		sub.StringVar(format, "f", "table", "table or json")
		id, err := needID()
		if err != nil {
			return fail(err)
		}
		pids, err := rt.Ps(id)
		if err != nil {
			return fail(err)
		}
		if *format == "json" {
			return ociJSON(pids)
		}
		fmt.Println("PID")
		for _, p := range pids {
			fmt.Println(p)
		}
		return 0
	case "features":
		return ociJSON(oci.Features(version))
	case "update", "pause", "resume", "checkpoint", "restore", "events":
		return fail(fmt.Errorf("%s is not supported by the airlock runtime: the container keeps the limits and state it was created with", cmd))
	}
	return fail(fmt.Errorf("unknown command %q (see airlock oci)", cmd))
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
