package build

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/internal/imageroot"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// runTimeout bounds one RUN step.
const runTimeout = 2 * time.Hour

// run executes a RUN step in a sandbox of the image so far (no
// workspace, egress only to the allow-list) with a writable layer the
// builder keeps, whose changes become the step's layer.
func (b *builder) run(in Instruction) error {
	argv := in.Exec
	if argv == nil {
		argv = []string{"/bin/sh", "-c", in.Args}
	}
	// Build args are in the environment of RUN (and so part of its key).
	var argEnv []string
	for k := range b.argSet {
		if v, ok := b.vars[k]; ok {
			argEnv = append(argEnv, k+"="+v)
		}
	}
	step := "RUN " + strings.Join(argv, "\x00") + "\x00" + strings.Join(sortedCopy(argEnv), "\x00") + "\x00" + strings.Join(b.o.Allow, ",")
	if b.cached(chain(b.key, step)) {
		return nil
	}
	if b.id == "" {
		return fmt.Errorf("RUN in an empty image (FROM scratch with nothing added): %w", errdefs.ErrInvalid)
	}
	r, err := b.hold("run")
	if err != nil {
		return err
	}
	defer r.Release()
	id := "build-" + randHex()
	w, err := imageroot.Make(b.o.WritableDir, id, -1, -1)
	if err != nil {
		return err
	}
	defer w.Remove()
	pol, err := b.runPolicy(r, argEnv)
	if err != nil {
		return err
	}
	spec := sandbox.Spec{ID: id, Policy: pol, Image: b.id, Root: r.SandboxRoot(), Log: b.o.Log}
	spec.Root.Writable = w.Dir
	if len(b.o.Allow) > 0 {
		closeEgress, err := b.o.Attach(&spec, pol.Network)
		if err != nil {
			return err
		}
		defer closeEgress()
	}
	if err := b.runIn(spec, argv); err != nil {
		return err
	}
	var skip []string
	for _, f := range spec.Files {
		skip = append(skip, strings.TrimPrefix(f.Path, "/")) // mount points of injected files
	}
	tmp := filepath.Join(b.o.WritableDir, id+".tar")
	defer os.Remove(tmp)
	l, n, err := upperLayer(w.Upper, tmp, skip)
	if err != nil {
		return err
	}
	if n == 0 {
		// Nothing changed: the config records the step, no layer.
		cf, err := b.img.ConfigFile()
		if err != nil {
			return err
		}
		cf = cf.DeepCopy()
		return b.configStep(Instruction{Cmd: "RUN", Args: in.Args, Exec: in.Exec}, cf)
	}
	return b.appendLayer(step, "RUN "+strings.Join(argv, " "), l)
}

// runPolicy is the policy of a RUN step's sandbox: the default profile
// with no workspace, no protected config, roomier limits, the build args
// as its environment and egress to the allow-list only, over the image
// so far (r).
func (b *builder) runPolicy(r *images.Rootfs, argEnv []string) (*policy.Policy, error) {
	p, err := policy.Profile("default")
	if err != nil {
		return nil, err
	}
	p.Filesystem.Workspace = "none"
	p.Filesystem.ProtectConfig = new(bool)
	p.Process.EnvAllow = nil // nothing of the builder's environment
	// The profile's limits, roomier where builds need it (a RUN step
	// may install a toolchain).
	p.Limits.Memory, p.Limits.CPUs, p.Limits.Pids = 8<<30, policy.Unlimited, 4096
	p.Limits.DiskBytes, p.Limits.Timeout, p.Limits.OutputBytes = 4<<30, policy.Duration(runTimeout), policy.Unlimited
	p.Process.Env = map[string]string{}
	for _, kv := range argEnv {
		k, v, _ := strings.Cut(kv, "=")
		p.Process.Env[k] = v
	}
	if len(b.o.Allow) > 0 {
		p.Network = policy.Network{Mode: policy.NetworkAllowlist, Allow: b.o.Allow}
	}
	if err := r.Apply(p); err != nil {
		return nil, err
	}
	return p.Resolve(policy.ResolveEnv{Cwd: "/", Home: "/", UID: -1, GID: -1, Exists: func(string) bool { return false }})
}

// runIn runs argv in a sandbox of spec, which it destroys; a non-zero
// exit is an error.
func (b *builder) runIn(spec sandbox.Spec, argv []string) error {
	ctx, cancel := context.WithTimeout(b.ctx, runTimeout)
	defer cancel()
	sb, err := b.o.Backend.Create(ctx, spec)
	if err != nil {
		return fmt.Errorf("sandbox for the step: %w", err)
	}
	proc, err := sb.Exec(ctx, sandbox.ExecRequest{Args: argv, Stdout: b.o.Out, Stderr: b.o.Out})
	if err != nil {
		sb.Destroy(context.Background())
		return err
	}
	st, err := proc.Wait(ctx)
	if derr := sb.Destroy(context.Background()); derr != nil && err == nil {
		err = derr
	}
	if err != nil {
		return err
	}
	if st.Code != 0 {
		return fmt.Errorf("%s exited with code %d: %w", strings.Join(argv, " "), st.Code, errdefs.ErrInvalid)
	}
	return nil
}
