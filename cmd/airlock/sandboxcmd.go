package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/sandbox"
)

func init() {
	register(command{name: "sandbox", short: "create and use sandboxes through airlock serve", run: runSandbox})
}

const sandboxUsage = `usage: airlock sandbox COMMAND [--host H] ...

commands:
  create [--backend B] [--profile P] [--policy FILE] [--image I] [--timeout D] [--keep-alive] [--label K=V]... [--env K=V]... [--volume NAME:PATH[:ro]]...
  ls [--label K=V]... [--all] [--json]
  inspect ID
  exec [-i] [-t] [--env K=V]... [--workdir DIR] [--timeout D] ID -- CMD [ARGS]
  cp SRC DST          (one of them ID:/path; directories travel as tar;
                       - is a tar, plain or gzip, on stdin or stdout)
  rm ID...
  logs [-f] [--json] ID  (the sandbox's audit events)
  watch [-r] [--json] ID PATH  (changes under PATH inside, one line each)
  volume create NAME SIZE | ls [--json] | rm NAME...  (named volumes;
                       mount with create --volume NAME:PATH[:ro])
  port-forward ID [LOCAL:]REMOTE  (127.0.0.1:LOCAL on this host to port
                       REMOTE on the sandbox's loopback; LOCAL 0: any)

  pause [--memory] ID...  (processes end, files and record are kept: survives the server;
                       --memory: frozen in place, memory kept, while the server lives)
  resume ID...
  checkpoint [--name N] [--json] ID
  checkpoint ls [--json] ID
  checkpoint rm ID CHECKPOINT
  rollback ID CHECKPOINT  (restores the workspace in place, restarts processes)

The server is --host (anywhere before --), else $AIRLOCK_HOST, else the
local socket; the key $AIRLOCK_API_KEY.
`

func runSandbox(args []string) int {
	host := os.Getenv(client.EnvHost)
	h, set, args, err := hoistHost(args)
	if err != nil {
		return fail("sandbox", err)
	}
	if set {
		host = h
	}
	if len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-h" && args[0] != "--help" {
		fmt.Fprintf(os.Stderr, "airlock sandbox: unknown flag %q\n%s", args[0], sandboxUsage)
		return exitAirlock
	}
	// with runs one verb with a client for host, made only once the verb
	// is known (an unknown one is refused before any connection).
	with := func(verb func(context.Context, *client.Client, []string) int) func([]string) int {
		return func(rest []string) int {
			c, err := client.New(host, client.WithAPIKey(os.Getenv(client.EnvAPIKey)))
			if err != nil {
				return fail("sandbox", err)
			}
			defer c.Close()
			ctx, stop := interruptContext()
			defer stop()
			return verb(ctx, c, rest)
		}
	}
	pauseResume := func(sub string) func(context.Context, *client.Client, []string) int {
		return func(ctx context.Context, c *client.Client, rest []string) int {
			return sbPauseResume(ctx, c, sub, rest)
		}
	}
	return dispatch("sandbox", sandboxUsage, []subcommand{
		{[]string{"create"}, with(sbCreate)},
		{[]string{"ls", "list"}, with(sbList)},
		{[]string{"inspect"}, with(sbInspect)},
		{[]string{"exec"}, with(sbExec)},
		{[]string{"cp"}, with(sbCopy)},
		{[]string{"rm"}, with(sbRemove)},
		{[]string{"logs"}, with(sbLogs)},
		{[]string{"watch"}, with(sbWatch)},
		{[]string{"volume"}, with(sbVolume)},
		{[]string{"port-forward"}, with(sbPortForward)},
		{[]string{"pause"}, with(pauseResume("pause"))},
		{[]string{"resume"}, with(pauseResume("resume"))},
		{[]string{"checkpoint"}, with(sbCheckpoint)},
		{[]string{"rollback"}, with(sbRollback)},
	}, args)
}

// execValueFlags are exec's flags that take a separate value: hoistHost
// skips their values when it looks for the command.
var execValueFlags = map[string]bool{"--env": true, "-env": true, "--workdir": true, "-workdir": true, "--timeout": true, "-timeout": true}

// hoistHost takes --host H (or --host=H) out of args wherever it stands
// before "--", so `airlock sandbox ls --host H` works as well as
// `airlock sandbox --host H ls`. It never looks into exec's command: it
// stops at the command after exec's sandbox ID.
func hoistHost(args []string) (host string, set bool, rest []string, err error) {
	rest = make([]string, 0, len(args))
	positional := 0
	exec := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || (exec && positional == 3) {
			rest = append(rest, args[i:]...)
			break
		}
		switch {
		case a == "--host" || a == "-host":
			if i+1 >= len(args) {
				return "", false, nil, fmt.Errorf("%s: missing value: %w", a, sandbox.ErrInvalid)
			}
			host, set = args[i+1], true
			i++
			continue
		case strings.HasPrefix(a, "--host="), strings.HasPrefix(a, "-host="):
			_, host, _ = strings.Cut(a, "=")
			set = true
			continue
		case strings.HasPrefix(a, "-"):
			if exec && execValueFlags[a] && i+1 < len(args) {
				rest = append(rest, a)
				i++
				a = args[i]
			}
		default:
			positional++
			if positional == 1 && a == "exec" {
				exec = true
			}
			if exec && positional == 3 {
				// exec ID CMD: CMD and everything after it are the command's.
				rest = append(rest, args[i:]...)
				return host, set, rest, nil
			}
		}
		rest = append(rest, a)
	}
	return host, set, rest, nil
}

func sbFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("airlock sandbox "+name, flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	return fs
}

func keyValues(l []string, what string) (map[string]string, error) {
	if len(l) == 0 {
		return nil, nil
	}
	m := map[string]string{}
	for _, kv := range l {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s %q: want KEY=VALUE: %w", what, kv, sandbox.ErrInvalid)
		}
		m[k] = v
	}
	return m, nil
}

// policyJSON reads a YAML policy file and returns it as JSON for the API
// (the server parses it strictly, naming fields).
func policyJSON(file string) (json.RawMessage, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("policy %q: %w", file, err)
	}
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("policy %q: %v: %w", file, err, sandbox.ErrInvalid)
	}
	j, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("policy %q: %v: %w", file, err, sandbox.ErrInvalid)
	}
	return j, nil
}

func sbCreate(ctx context.Context, c *client.Client, args []string) int {
	fs := sbFlags("create")
	backend := fs.String("backend", "", "backend (default: the server's)")
	profile := fs.String("profile", "", "built-in policy profile")
	pol := fs.String("policy", "", "policy file (YAML) layered on the profile")
	image := fs.String("image", "", "root filesystem image name")
	timeout := fs.Duration("timeout", 0, "lifetime (default: the server's)")
	keep := fs.Bool("keep-alive", false, "never expire")
	keepWhile := fs.Bool("keep-alive-while-processes", false, "do not expire while a background process runs")
	autoResume := fs.Bool("auto-resume", false, "a request to the sandbox while it is paused resumes it")
	asJSON := fs.Bool("json", false, "print the sandbox as JSON")
	var labels, env, vols stringList
	fs.Var(&vols, "volume", "mount a named volume NAME:PATH[:ro] (repeatable)")
	fs.Var(&labels, "label", "label K=V (repeatable)")
	fs.Var(&env, "env", "environment K=V for every process (repeatable)")
	if err := fs.Parse(args); err != nil {
		return exitAirlock
	}
	req := api.CreateSandboxRequest{Backend: *backend, Profile: *profile, Image: *image, Timeout: api.Duration(*timeout), KeepAlive: *keep}
	req.AutoResume = *autoResume
	if *keepWhile {
		req.KeepAliveWhile = &api.KeepAliveSpec{While: api.KeepAliveWhileProcesses}
	}
	var err error
	if req.Labels, err = keyValues(labels, "--label"); err != nil {
		return fail("sandbox create", err)
	}
	if req.Env, err = keyValues(env, "--env"); err != nil {
		return fail("sandbox create", err)
	}
	if req.Volumes, err = parseVolumeMounts(vols); err != nil {
		return fail("sandbox create", err)
	}
	if *pol != "" {
		if req.Policy, err = policyJSON(*pol); err != nil {
			return fail("sandbox create", err)
		}
	}
	sb, err := c.Create(ctx, req)
	if err != nil {
		return fail("sandbox create", err)
	}
	if *asJSON {
		printJSON(sb)
	} else {
		fmt.Println(sb.ID)
	}
	return 0
}

func printJSON(v any) {
	e := json.NewEncoder(os.Stdout)
	e.SetIndent("", "  ")
	e.Encode(v)
}

func sbList(ctx context.Context, c *client.Client, args []string) int {
	fs := sbFlags("ls")
	all := fs.Bool("all", false, "include stopped sandboxes")
	asJSON := fs.Bool("json", false, "print JSON")
	var labels stringList
	fs.Var(&labels, "label", "only sandboxes with label K=V (repeatable)")
	if err := fs.Parse(args); err != nil {
		return exitAirlock
	}
	lm, err := keyValues(labels, "--label")
	if err != nil {
		return fail("sandbox ls", err)
	}
	sbs, err := c.List(ctx, client.ListOptions{Labels: lm, All: *all})
	if err != nil {
		return fail("sandbox ls", err)
	}
	if *asJSON {
		printJSON(sbs)
		return 0
	}
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tBACKEND\tPROFILE\tSTATE\tCREATED\tEXPIRES\tLABELS")
	for _, s := range sbs {
		exp := "-"
		if s.KeepAlive {
			exp = "never"
		} else if !s.ExpiresAt.IsZero() && s.State == "running" {
			exp = time.Until(s.ExpiresAt).Round(time.Second).String()
		}
		var ls []string
		for k, v := range s.Labels {
			ls = append(ls, k+"="+v)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Backend, s.Profile, s.State,
			s.CreatedAt.Local().Format("15:04:05"), exp, strings.Join(ls, ","))
	}
	tw.Flush()
	return 0
}

func sbInspect(ctx context.Context, c *client.Client, args []string) int {
	if len(args) != 1 {
		return fail("sandbox inspect", fmt.Errorf("want one sandbox ID: %w", sandbox.ErrInvalid))
	}
	sb, err := c.Get(ctx, args[0])
	if err != nil {
		return fail("sandbox inspect", err)
	}
	printJSON(sb)
	return 0
}

func sbRemove(ctx context.Context, c *client.Client, args []string) int {
	if len(args) == 0 {
		return fail("sandbox rm", fmt.Errorf("want sandbox IDs: %w", sandbox.ErrInvalid))
	}
	code := 0
	for _, id := range args {
		if err := c.Delete(ctx, id); err != nil {
			code = fail("sandbox rm", err)
			continue
		}
		fmt.Println(id)
	}
	return code
}

func sbLogs(ctx context.Context, c *client.Client, args []string) int {
	fs := sbFlags("logs")
	follow := fs.Bool("f", false, "follow until the sandbox ends")
	asJSON := fs.Bool("json", false, "print the events as JSON lines")
	if err := fs.Parse(args); err != nil {
		return exitAirlock
	}
	if fs.NArg() != 1 {
		return fail("sandbox logs", fmt.Errorf("want one sandbox ID: %w", sandbox.ErrInvalid))
	}
	enc := json.NewEncoder(os.Stdout)
	print := func(e api.Event) error {
		if *asJSON {
			return enc.Encode(e)
		}
		_, err := fmt.Println(formatEvent(e))
		return err
	}
	if *follow {
		err := c.FollowEvents(ctx, fs.Arg(0), 0, print)
		if err != nil && ctx.Err() == nil {
			return fail("sandbox logs", err)
		}
		return 0
	}
	evs, err := c.Events(ctx, fs.Arg(0), 0)
	if err != nil {
		return fail("sandbox logs", err)
	}
	for _, e := range evs {
		print(e)
	}
	return 0
}

// formatEvent is one event for a human: local time, type, message, then
// the fields as k=v in name order. Everything in an event may come from
// inside the sandbox, so nothing is printed raw: control characters could
// drive the reader's terminal.
func formatEvent(e api.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %-8s", e.Time.Local().Format("2006-01-02 15:04:05.000"), printable(e.Type))
	if e.Message != "" {
		b.WriteString("  ")
		b.WriteString(printable(e.Message))
	}
	keys := make([]string, 0, len(e.Fields))
	for k := range e.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, ok := e.Fields[k].(string)
		switch {
		case !ok: // JSON escapes control characters
			j, _ := json.Marshal(e.Fields[k])
			v = string(j)
		case v == "" || strings.ContainsAny(v, " \t\"=") || printable(v) != v:
			v = strconv.Quote(v)
		}
		fmt.Fprintf(&b, " %s=%s", printable(k), v)
	}
	return b.String()
}

// printable replaces control characters (and invalid UTF-8) with '?'.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError {
			return '?'
		}
		return r
	}, s)
}

// interruptContext is ended by SIGINT or SIGTERM, with interrupted as its
// cause (interruptCode gives the exit code).
func interruptContext() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-sigs:
			cancel(interrupted{s})
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(sigs); cancel(nil) }
}
