package build

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// Options configure a Build.
type Options struct {
	Store *images.Store
	// Backend runs the RUN steps (native, or gvisor).
	Backend sandbox.Backend
	// Dockerfile is the Dockerfile's path; Context the directory COPY
	// and ADD read from.
	Dockerfile string
	Context    string
	// Tags name the result ("myimage:1").
	Tags []string
	// Args are --build-arg values (for ARGs the Dockerfile declares).
	Args map[string]string
	// Allow is the egress allow-list of RUN steps (host[:port], CIDR);
	// empty: no network. Attach connects a step's spec to its egress
	// proxy (the caller's), returning what closes it; required with Allow.
	Allow  []string
	Attach func(spec *sandbox.Spec, network policy.Network) (func(), error)
	// Pull fetches a FROM image the store lacks; nil: such a FROM fails.
	Pull func(ctx context.Context, ref string) error
	// NoCache runs every step even when the build cache has its result.
	NoCache bool
	// Out receives the step log and what RUN steps print.
	Out io.Writer
	// WritableDir holds RUN steps' writable layers while they run (on
	// disk). Required.
	WritableDir string
	Log         *slog.Logger
}

// builder is one Build.
type builder struct {
	o      Options
	ctx    context.Context
	img    v1.Image // the image so far
	id     string   // its store ID ("" for scratch before a step)
	key    string   // cache key of the steps so far
	vars   map[string]string
	argSet map[string]bool
	file   string
}

// Build runs the Dockerfile and returns the image, tagged. Each step's
// result is cached (by the chain of steps before it, the instruction and,
// for COPY and ADD, the content copied). A failing step fails the build
// naming its line; nothing of it is kept.
func Build(ctx context.Context, o Options) (*images.Image, error) {
	if o.Store == nil || o.Backend == nil || o.WritableDir == "" {
		return nil, fmt.Errorf("image build: store, backend and writable dir are required: %w", errdefs.ErrInvalid)
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if len(o.Allow) > 0 && o.Attach == nil {
		return nil, fmt.Errorf("image build: an egress allow-list needs an egress proxy (Attach): %w", errdefs.ErrInvalid)
	}
	data, err := os.ReadFile(o.Dockerfile)
	if err != nil {
		return nil, fmt.Errorf("image build: %w: %w", err, errdefs.ErrInvalid)
	}
	if fi, err := os.Stat(o.Context); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("image build: context %s is not a directory: %w", o.Context, errdefs.ErrInvalid)
	}
	for _, t := range o.Tags {
		if _, err := images.ParseTag(t); err != nil {
			return nil, fmt.Errorf("image build: -t: %w", err)
		}
	}
	ins, err := Parse(filepath.Base(o.Dockerfile), data)
	if err != nil {
		return nil, fmt.Errorf("image build: %w", err)
	}
	b := &builder{o: o, ctx: ctx, vars: map[string]string{}, argSet: map[string]bool{}, file: filepath.Base(o.Dockerfile)}
	for i, in := range ins {
		fmt.Fprintf(o.Out, "step %d/%d: %s %s\n", i+1, len(ins), in.Cmd, in.Args)
		if err := b.step(in); err != nil {
			return nil, fmt.Errorf("image build: %s:%d: %s: %w", b.file, in.Line, in.Cmd, err)
		}
	}
	if b.id == "" {
		if err := b.commit("scratch", nil); err != nil {
			return nil, fmt.Errorf("image build: %w", err)
		}
	}
	im, err := o.Store.AddImage(ctx, b.img, images.AddOptions{Names: o.Tags})
	if err != nil {
		return nil, fmt.Errorf("image build: %w", err)
	}
	return im, nil
}

func (b *builder) step(in Instruction) error {
	if in.Cmd == "ARG" {
		return b.arg(in)
	}
	if in.Cmd == "FROM" {
		return b.from(in)
	}
	args, err := expand(in.Args, b.vars)
	if err != nil {
		return err
	}
	if in.Exec != nil || in.Cmd == "RUN" || in.Cmd == "CMD" || in.Cmd == "ENTRYPOINT" {
		args = in.Args // commands keep their $ for the shell inside
	}
	for _, f := range in.Flags {
		if !(in.Cmd == "COPY" || in.Cmd == "ADD") || !(strings.HasPrefix(f, "--chown=") || strings.HasPrefix(f, "--chmod=")) {
			return fmt.Errorf("flag %s is not supported: %w", f, errdefs.ErrNotSupported)
		}
	}
	switch in.Cmd {
	case "RUN":
		return b.run(in)
	case "COPY", "ADD":
		return b.copy(in, args)
	case "WORKDIR":
		return b.workdir(args)
	}
	cf, err := b.img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	c := &cf.Config
	switch in.Cmd {
	case "ENV":
		kvs, err := keyValues(args)
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			c.Env = setEnv(c.Env, kv[0], kv[1])
			b.vars[kv[0]] = kv[1]
		}
	case "LABEL":
		kvs, err := keyValues(args)
		if err != nil {
			return err
		}
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		for _, kv := range kvs {
			c.Labels[kv[0]] = kv[1]
		}
	case "USER":
		c.User = args
	case "ENTRYPOINT":
		c.Entrypoint = command(in)
	case "CMD":
		c.Cmd = command(in)
	}
	return b.configStep(in, cf)
}

// command is an ENTRYPOINT or CMD: the exec form as given, the shell form
// through /bin/sh -c.
func command(in Instruction) []string {
	if in.Exec != nil {
		return in.Exec
	}
	if in.Args == "" {
		return nil
	}
	return []string{"/bin/sh", "-c", in.Args}
}

func setEnv(env []string, k, v string) []string {
	for i, kv := range env {
		if strings.HasPrefix(kv, k+"=") {
			env[i] = k + "=" + v
			return env
		}
	}
	return append(env, k+"="+v)
}

func (b *builder) arg(in Instruction) error {
	name, def, hasDef := strings.Cut(in.Args, "=")
	name = strings.TrimSpace(name)
	if !validName(name) {
		return fmt.Errorf("ARG %q: bad name: %w", in.Args, errdefs.ErrInvalid)
	}
	v := def
	if hasDef {
		var err error
		if v, err = expand(strings.Trim(def, `"`), b.vars); err != nil {
			return err
		}
	}
	if given, ok := b.o.Args[name]; ok {
		v, hasDef = given, true
	}
	if hasDef {
		b.vars[name] = v
	}
	b.argSet[name] = true
	b.key = chain(b.key, "ARG "+name+"="+v)
	return nil
}

// from starts the image: scratch, or an image of the store (pulled when
// missing and the caller allows).
func (b *builder) from(in Instruction) error {
	ref, err := expand(in.Args, b.vars)
	if err != nil {
		return err
	}
	if f := strings.Fields(ref); len(f) == 3 && strings.EqualFold(f[1], "AS") {
		ref = f[0] // a stage name means nothing with one stage
	} else if len(f) != 1 {
		return fmt.Errorf("FROM %q: want FROM IMAGE [AS NAME]: %w", ref, errdefs.ErrInvalid)
	}
	if ref == "scratch" {
		cf := &v1.ConfigFile{OS: "linux", Architecture: runtime.GOARCH, RootFS: v1.RootFS{Type: "layers"}}
		img, err := mutate.ConfigFile(empty.Image, cf)
		if err != nil {
			return err
		}
		b.img, b.key = img, chain("", "FROM scratch")
		return nil
	}
	img, im, err := b.o.Store.V1Image(b.ctx, ref)
	if errors.Is(err, errdefs.ErrNotFound) && b.o.Pull != nil {
		if err := b.o.Pull(b.ctx, ref); err != nil {
			return err
		}
		img, im, err = b.o.Store.V1Image(b.ctx, ref)
	}
	if err != nil {
		return err
	}
	b.img, b.id, b.key = img, im.ID, chain("", "FROM "+im.ID)
	// The image's ENV is what later instructions substitute.
	for _, kv := range im.Config.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if _, isArg := b.vars[k]; !isArg || !b.argSet[k] {
				b.vars[k] = v
			}
		}
	}
	return nil
}

func chain(prev, step string) string {
	h := sha256.Sum256([]byte(prev + "\n" + step))
	return hex.EncodeToString(h[:])
}

// cached switches to the cached result of step key, if any.
func (b *builder) cached(key string) bool {
	if b.o.NoCache {
		return false
	}
	im, ok := b.o.Store.Cached(b.ctx, key)
	if !ok {
		return false
	}
	img, _, err := b.o.Store.V1Image(b.ctx, im.ID)
	if err != nil {
		return false
	}
	b.img, b.id, b.key = img, im.ID, key
	fmt.Fprintf(b.o.Out, " ---> cached %s\n", im.ShortID())
	return true
}

// commit records the image so far as the result of step (cached under
// the new key).
func (b *builder) commit(step string, img v1.Image) error {
	key := chain(b.key, step)
	if img == nil {
		img = b.img
	}
	if cf, err := img.ConfigFile(); err == nil {
		cf = cf.DeepCopy()
		cf.Created = v1.Time{Time: time.Now().UTC().Truncate(time.Second)}
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return err
		}
	}
	im, err := b.o.Store.AddCached(b.ctx, key, img, nil)
	if err != nil {
		return err
	}
	stored, _, err := b.o.Store.V1Image(b.ctx, im.ID)
	if err != nil {
		return err
	}
	b.img, b.id, b.key = stored, im.ID, key
	fmt.Fprintf(b.o.Out, " ---> %s\n", im.ShortID())
	return nil
}

// configStep changes the config only.
func (b *builder) configStep(in Instruction, cf *v1.ConfigFile) error {
	step := in.Cmd + " " + in.Args + strings.Join(in.Exec, "\x00")
	if b.cached(chain(b.key, step)) {
		return nil
	}
	cf.History = append(cf.History, v1.History{Created: v1.Time{Time: time.Now().UTC()}, CreatedBy: in.Cmd + " " + in.Args, EmptyLayer: true})
	img, err := mutate.ConfigFile(b.img, cf)
	if err != nil {
		return err
	}
	return b.commit(step, img)
}

// appendLayer adds a layer made from the tar file at p with history
// createdBy, as step.
func (b *builder) appendLayer(step, createdBy string, layer v1.Layer) error {
	img, err := mutate.Append(b.img, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: time.Now().UTC()}, CreatedBy: createdBy}})
	if err != nil {
		return err
	}
	return b.commit(step, img)
}

// hold acquires the image so far for a while (nil for scratch).
func (b *builder) hold(what string) (*images.Rootfs, error) {
	if b.id == "" {
		return nil, nil
	}
	return b.o.Store.Acquire(b.ctx, b.id, "build-"+randHex()+"-"+what, images.AcquireOptions{})
}

func randHex() string {
	var x [6]byte
	_, _ = rand.Read(x[:])
	return hex.EncodeToString(x[:])
}

// workdir sets the working directory, making it (a layer of the missing
// directories) when the image lacks it.
func (b *builder) workdir(args string) error {
	cf, err := b.img.ConfigFile()
	if err != nil {
		return err
	}
	dir := args
	if !path.IsAbs(dir) {
		dir = path.Join("/", cf.Config.WorkingDir, dir)
	}
	dir = path.Clean(dir)
	step := "WORKDIR " + dir
	if b.cached(chain(b.key, step)) {
		return nil
	}
	missing, err := b.missingDirs(dir)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		l, err := dirsLayer(missing)
		if err != nil {
			return err
		}
		img, err := mutate.Append(b.img, mutate.Addendum{Layer: l, History: v1.History{Created: v1.Time{Time: time.Now().UTC()}, CreatedBy: "WORKDIR " + dir}})
		if err != nil {
			return err
		}
		b.img = img
	}
	cf, err = b.img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Config.WorkingDir = dir
	img, err := mutate.ConfigFile(b.img, cf)
	if err != nil {
		return err
	}
	return b.commit(step, img)
}

// missingDirs lists dir and its parents the image does not have, top
// down; a non-directory on the way is an error.
func (b *builder) missingDirs(dir string) ([]string, error) {
	r, err := b.hold("stat")
	if err != nil {
		return nil, err
	}
	defer r.Release()
	var missing []string
	for p := dir; p != "/"; p = path.Dir(p) {
		if r != nil {
			if fi, err := r.Lstat(p); err == nil {
				if !fi.IsDir() {
					return nil, fmt.Errorf("%s exists and is not a directory: %w", p, errdefs.ErrInvalid)
				}
				break
			}
		}
		missing = append([]string{p}, missing...)
	}
	return missing, nil
}
