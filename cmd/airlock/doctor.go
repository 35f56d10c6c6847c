package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sort"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/internal/volume"
	"github.com/airlock-dev/airlock/sandbox"
)

func init() {
	register(command{name: "doctor", short: "report what this host supports, backend by backend", run: runDoctor})
}

type doctorReport struct {
	Host     map[string]string        `json:"host"`
	Backends map[string]sandbox.Probe `json:"backends"`
	Default  string                   `json:"default_backend"`
	// OCIRuntimes: daemons' registration of the airlock OCI runtime.
	OCIRuntimes []ociRuntimeCheck `json:"oci_runtimes,omitempty"`
}

// diagnoser is a backend with checks too costly for Probe (which `--backend
// auto` runs every time): doctor runs them.
type diagnoser interface {
	Diagnose(ctx context.Context) sandbox.Probe
}

func runDoctor(args []string) int {
	fs := newFlagSet("doctor")
	jsonOut := fs.Bool("json", false, "print the report as JSON")
	dockerHost := fs.String("docker-host", "", "check this Docker daemon's airlock runtime (default $DOCKER_HOST or unix:///var/run/docker.sock)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "airlock doctor: unexpected argument %q\n", fs.Arg(0))
		return exitAirlock
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	rep := doctorReport{
		Host:     map[string]string{"os": runtime.GOOS, "arch": runtime.GOARCH, "euid": fmt.Sprint(os.Geteuid())},
		Backends: map[string]sandbox.Probe{},
		Default:  "native",
	}
	// What `airlock serve` would use for sandboxes' host ids and disks.
	if os.Geteuid() == 0 {
		if what, err := backend.DescribeHostIDs("auto"); err != nil {
			rep.Host["serve_host_ids"] = "UNAVAILABLE: " + err.Error()
		} else {
			rep.Host["serve_host_ids"] = what
		}
	} else {
		rep.Host["serve_host_ids"] = "none: an unprivileged server's sandboxes run as its own user"
	}
	rep.Host["run_image_host_ids"] = runImageHostIDs()
	if why := volume.Available(); why != "" {
		rep.Host["serve_disk_quota"] = "none: " + why
	} else {
		rep.Host["serve_disk_quota"] = "volume (an ext4 image per sandbox)"
	}
	for _, name := range backendNames() {
		b, err := openBackend(name, log)
		if err != nil {
			rep.Backends[name] = sandbox.Probe{Reason: err.Error()}
			continue
		}
		if d, ok := b.(diagnoser); ok {
			rep.Backends[name] = d.Diagnose(ctx)
			continue
		}
		rep.Backends[name] = b.Probe(ctx)
	}
	rep.OCIRuntimes = append(rep.OCIRuntimes, checkDockerRuntime(ctx, *dockerHost))
	if *jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
		return 0
	}
	fmt.Printf("host: %s/%s euid=%s\n", rep.Host["os"], rep.Host["arch"], rep.Host["euid"])
	fmt.Printf("serve: host ids %s\n       disk quota %s\n\n", rep.Host["serve_host_ids"], rep.Host["serve_disk_quota"])
	for _, name := range backendNames() {
		p := rep.Backends[name]
		state := "available"
		if p.Available && p.Reason != "" {
			state = "available, but " + p.Reason
		}
		if !p.Available {
			state = "UNAVAILABLE: " + p.Reason
		}
		fmt.Printf("%-8s %-8s %s\n", name, p.Isolation, state)
		keys := make([]string, 0, len(p.Details))
		for k := range p.Details {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Printf("           %-24s %s\n", k, p.Details[k])
		}
	}
	printRuntimeChecks(rep.OCIRuntimes)
	return 0
}

// runImageHostIDs says where `airlock run --image` on native takes its
// sandbox's host id range from (withImageIDs), or why it would refuse.
func runImageHostIDs() string {
	spec, err := imageIDSpec()
	if err == nil {
		var what string
		if what, err = backend.DescribeHostIDs(spec); err == nil {
			return what
		}
	}
	return "UNAVAILABLE: " + err.Error()
}
