package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/sandbox"
)

func init() {
	register(command{name: "sandbox", short: "create and use sandboxes through airlock serve", run: runSandbox})
}

const sandboxUsage = `usage: airlock sandbox [--host H] COMMAND ...

commands:
  create [--backend B] [--profile P] [--policy FILE] [--image I] [--timeout D] [--keep-alive] [--label K=V]... [--env K=V]...
  ls [--label K=V]... [--all] [--json]
  inspect ID
  exec [-i] [-t] [--env K=V]... [--workdir DIR] [--timeout D] ID -- CMD [ARGS]
  cp SRC DST          (one of them ID:/path; directories travel as tar;
                       - is a tar, plain or gzip, on stdin or stdout)
  rm ID...
  logs [-f] ID        (the sandbox's audit events)

The server is $AIRLOCK_HOST (default: the local socket), the key $AIRLOCK_API_KEY.
`

func runSandbox(args []string) int {
	host := os.Getenv(client.EnvHost)
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch {
		case args[0] == "--host" || args[0] == "-host":
			if len(args) < 2 {
				fmt.Fprint(os.Stderr, sandboxUsage)
				return exitAirlock
			}
			host, args = args[1], args[2:]
		case strings.HasPrefix(args[0], "--host="):
			host, args = strings.TrimPrefix(args[0], "--host="), args[1:]
		case args[0] == "-h" || args[0] == "--help":
			fmt.Fprint(os.Stderr, sandboxUsage)
			return 0
		default:
			fmt.Fprintf(os.Stderr, "airlock sandbox: unknown flag %q\n%s", args[0], sandboxUsage)
			return exitAirlock
		}
	}
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, sandboxUsage)
		return exitAirlock
	}
	c, err := client.New(host, client.WithAPIKey(os.Getenv(client.EnvAPIKey)))
	if err != nil {
		return fail("sandbox", err)
	}
	defer c.Close()
	ctx, stop := interruptContext()
	defer stop()
	sub, rest := args[0], args[1:]
	var code int
	switch sub {
	case "create":
		code = sbCreate(ctx, c, rest)
	case "ls", "list":
		code = sbList(ctx, c, rest)
	case "inspect":
		code = sbInspect(ctx, c, rest)
	case "exec":
		code = sbExec(ctx, c, rest)
	case "cp":
		code = sbCopy(ctx, c, rest)
	case "rm":
		code = sbRemove(ctx, c, rest)
	case "logs":
		code = sbLogs(ctx, c, rest)
	default:
		fmt.Fprintf(os.Stderr, "airlock sandbox: unknown command %q\n%s", sub, sandboxUsage)
		return exitAirlock
	}
	return code
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
	asJSON := fs.Bool("json", false, "print the sandbox as JSON")
	var labels, env stringList
	fs.Var(&labels, "label", "label K=V (repeatable)")
	fs.Var(&env, "env", "environment K=V for every process (repeatable)")
	if err := fs.Parse(args); err != nil {
		return exitAirlock
	}
	req := api.CreateSandboxRequest{Backend: *backend, Profile: *profile, Image: *image, Timeout: api.Duration(*timeout), KeepAlive: *keep}
	var err error
	if req.Labels, err = keyValues(labels, "--label"); err != nil {
		return fail("sandbox create", err)
	}
	if req.Env, err = keyValues(env, "--env"); err != nil {
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
	if err := fs.Parse(args); err != nil {
		return exitAirlock
	}
	if fs.NArg() != 1 {
		return fail("sandbox logs", fmt.Errorf("want one sandbox ID: %w", sandbox.ErrInvalid))
	}
	enc := json.NewEncoder(os.Stdout)
	if *follow {
		err := c.FollowEvents(ctx, fs.Arg(0), 0, func(e api.Event) error { return enc.Encode(e) })
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
		enc.Encode(e)
	}
	return 0
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
