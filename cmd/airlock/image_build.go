package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/images/build"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

func imageBuild(ctx context.Context, args []string) error {
	var file, backendName string
	var tags, buildArgs, allow listFlag
	var noCache, quiet bool
	rest, err := parseImageFlags("build", args, func(fs *flag.FlagSet) {
		fs.StringVar(&file, "f", "", "the Dockerfile (default: DIR/Dockerfile)")
		fs.Var(&tags, "t", "name the image `NAME[:TAG]` (repeatable)")
		fs.Var(&buildArgs, "build-arg", "set build argument `K=V` (repeatable)")
		fs.Var(&allow, "allow", "let RUN steps reach `HOST[:PORT]` or a CIDR through the egress proxy (repeatable; default: no network)")
		fs.StringVar(&backendName, "backend", "native", "backend RUN steps run in: native or gvisor")
		fs.BoolVar(&noCache, "no-cache", false, "run every step, even those the build cache has")
		fs.BoolVar(&quiet, "q", false, "print only the image ID")
	})
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return fmt.Errorf("want the build context directory (airlock image build -f Dockerfile -t NAME DIR): %w", sandbox.ErrInvalid)
	}
	dir, err := filepath.Abs(rest[0])
	if err != nil {
		return err
	}
	if file == "" {
		file = filepath.Join(dir, "Dockerfile")
	}
	bargs, err := parseBuildArgs(buildArgs)
	if err != nil {
		return err
	}
	for i, a := range allow {
		if _, err := policy.ParseNetworkEntry(a); err != nil {
			return fmt.Errorf("--allow %q: %w", a, err)
		}
		allow[i] = a
	}
	s, err := openImageStore()
	if err != nil {
		return err
	}
	log := newLogger()
	b, err := openBackend(backendName, log)
	if err != nil {
		return err
	}
	out := os.Stderr
	if quiet {
		out = nil
	}
	o := build.Options{
		Store: s, Backend: b, Dockerfile: file, Context: dir, Tags: tags, Args: bargs, Allow: allow, NoCache: noCache,
		WritableDir: filepath.Join(filepath.Dir(s.Root()), "build"), Log: log,
		Pull: func(ctx context.Context, ref string) error {
			pr := newProgress(os.Stderr, "pull "+ref, quiet)
			_, err := s.Pull(ctx, ref, images.PullOptions{Progress: pr.report})
			pr.finish(err)
			return err
		},
		Attach: func(spec *sandbox.Spec, _ policy.Network) (func(), error) {
			eg, err := setupEgress(spec, audit.Discard, log)
			if err != nil || eg == nil {
				return func() {}, err
			}
			return func() {}, nil // the proxy lives in this process; nothing to close
		},
	}
	if out != nil {
		o.Out = out
	}
	im, err := build.Build(ctx, o)
	if err != nil {
		return err
	}
	printImageResult(im, quiet)
	return nil
}

// parseBuildArgs turns the --build-arg flags into a map: K=V, or K alone
// for the host's variable K.
func parseBuildArgs(buildArgs []string) (map[string]string, error) {
	bargs := map[string]string{}
	for _, a := range buildArgs {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			if v, ok := os.LookupEnv(a); ok && a != "" {
				bargs[a] = v
				continue
			}
			return nil, fmt.Errorf("--build-arg %q: want K=V: %w", a, sandbox.ErrInvalid)
		}
		bargs[k] = v
	}
	return bargs, nil
}
