package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/sandbox"
)

func init() {
	register(command{name: "image", short: "pull, import, build, list and remove images (the local image store)", run: runImage})
}

const imageUsage = `usage: airlock image COMMAND [flags] ...

commands:
  pull [-q] [--platform OS/ARCH] REF     fetch from a registry (auth: the Docker config)
  import [-q] [--tag NAME] PATH           a docker save tarball or an OCI layout directory
  build -f Dockerfile -t NAME [--build-arg K=V]... [--allow HOST]... DIR
  ls [-q] [--json]
  inspect REF...                          JSON
  rm REF...
  prune [-a]                              remove unnamed images (-a: every unused one) and their layers
  export -o FILE REF                      a docker save tarball (docker load reads it)

The store is $AIRLOCK_IMAGE_STORE, else /var/lib/airlock/images as root,
else ~/.local/share/airlock/images. Progress goes to stderr (a bar at a
terminal); -q prints only image IDs.
`

// imageStoreRoot is the local store's directory.
func imageStoreRoot() string {
	if d := os.Getenv("AIRLOCK_IMAGE_STORE"); d != "" {
		return d
	}
	return images.DefaultRoot()
}

func openImageStore() (*images.Store, error) {
	return images.Open(imageStoreRoot(), images.Options{Log: newLogger()})
}

func runImage(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	verb := func(name string, do func(context.Context, []string) error) func([]string) int {
		return func(args []string) int {
			err := do(ctx, args)
			if errors.Is(err, errHelp) {
				return 0
			}
			if err != nil {
				return fail("image "+name, err)
			}
			return 0
		}
	}
	return dispatch("image", imageUsage, []subcommand{
		{[]string{"pull"}, verb("pull", imagePull)},
		{[]string{"import"}, verb("import", imageImport)},
		{[]string{"build"}, verb("build", imageBuild)},
		{[]string{"ls", "list"}, verb("ls", imageList)},
		{[]string{"inspect"}, verb("inspect", imageInspect)},
		{[]string{"rm", "remove"}, verb("rm", imageRemove)},
		{[]string{"prune"}, verb("prune", imagePrune)},
		{[]string{"export", "save"}, verb("export", imageExport)},
	}, args)
}

// errHelp: the flags asked for help, which was printed.
var errHelp = errors.New("help")

// parseImageFlags parses a subcommand's flags; bad ones are ErrInvalid
// naming the flag.
func parseImageFlags(name string, args []string, define func(fs *flag.FlagSet)) ([]string, error) {
	fs := newFlagSet("image " + name)
	define(fs)
	code, ok := parseFlags(fs, args)
	if !ok {
		if code == 0 {
			return nil, errHelp
		}
		return nil, fmt.Errorf("bad flags: %w", sandbox.ErrInvalid)
	}
	return fs.Args(), nil
}

func imagePull(ctx context.Context, args []string) error {
	var quiet bool
	var platform string
	rest, err := parseImageFlags("pull", args, func(fs *flag.FlagSet) {
		fs.BoolVar(&quiet, "q", false, "print only the image ID")
		fs.StringVar(&platform, "platform", "", "platform of a multi-platform image (default linux/this machine's)")
	})
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return fmt.Errorf("want one image reference (airlock image pull REF): %w", sandbox.ErrInvalid)
	}
	s, err := openImageStore()
	if err != nil {
		return err
	}
	pr := newProgress(os.Stderr, "pull "+rest[0], quiet)
	im, err := s.Pull(ctx, rest[0], images.PullOptions{Platform: platform, Progress: pr.report})
	pr.finish(err)
	if err != nil {
		return err
	}
	printImageResult(im, quiet)
	return nil
}

func printImageResult(im *images.Image, quiet bool) {
	if quiet {
		fmt.Println(im.ID)
		return
	}
	name := im.ShortID()
	if len(im.Names) > 0 {
		name = images.ShortName(im.Names[0])
	}
	fmt.Printf("%s %s (%s, %s unpacked)\n", name, im.ID, humanBytes(im.Size), humanBytes(im.Unpacked))
}

func imageImport(ctx context.Context, args []string) error {
	var quiet bool
	var tag string
	rest, err := parseImageFlags("import", args, func(fs *flag.FlagSet) {
		fs.BoolVar(&quiet, "q", false, "print only the image IDs")
		fs.StringVar(&tag, "tag", "", "name the imported image `NAME` (an archive of one image)")
	})
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return fmt.Errorf("want one path (airlock image import PATH): %w", sandbox.ErrInvalid)
	}
	s, err := openImageStore()
	if err != nil {
		return err
	}
	pr := newProgress(os.Stderr, "import "+rest[0], quiet)
	ims, err := s.Import(ctx, rest[0], images.ImportOptions{Tag: tag, Progress: pr.report})
	pr.finish(err)
	if err != nil {
		return err
	}
	for _, im := range ims {
		printImageResult(im, quiet)
	}
	return nil
}

func imageList(ctx context.Context, args []string) error {
	var quiet, asJSON bool
	if _, err := parseImageFlags("ls", args, func(fs *flag.FlagSet) {
		fs.BoolVar(&quiet, "q", false, "print only image IDs")
		fs.BoolVar(&asJSON, "json", false, "print JSON")
	}); err != nil {
		return err
	}
	s, err := openImageStore()
	if err != nil {
		return err
	}
	ims, err := s.List(ctx)
	if err != nil {
		return err
	}
	switch {
	case asJSON:
		return json.NewEncoder(os.Stdout).Encode(ims)
	case quiet:
		for _, im := range ims {
			fmt.Println(im.ID)
		}
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tCREATED\tSIZE\tUNPACKED")
	for _, im := range ims {
		names := im.Names
		if len(names) == 0 {
			names = []string{"<none>"}
		}
		for _, n := range names {
			created := "-"
			if !im.Created.IsZero() {
				created = im.Created.Format(time.DateOnly)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", images.ShortName(n), im.ShortID(), created, humanBytes(im.Size), humanBytes(im.Unpacked))
		}
	}
	return tw.Flush()
}

func imageInspect(ctx context.Context, args []string) error {
	rest, err := parseImageFlags("inspect", args, func(*flag.FlagSet) {})
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		return fmt.Errorf("want an image reference: %w", sandbox.ErrInvalid)
	}
	s, err := openImageStore()
	if err != nil {
		return err
	}
	var out []*images.Image
	for _, ref := range rest {
		im, err := s.Inspect(ctx, ref)
		if err != nil {
			return err
		}
		out = append(out, im)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func imageRemove(ctx context.Context, args []string) error {
	rest, err := parseImageFlags("rm", args, func(*flag.FlagSet) {})
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		return fmt.Errorf("want an image reference: %w", sandbox.ErrInvalid)
	}
	s, err := openImageStore()
	if err != nil {
		return err
	}
	var errs []error
	for _, ref := range rest {
		im, err := s.Remove(ctx, ref)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Printf("untagged %s (%s)\n", ref, im.ShortID())
	}
	return errors.Join(errs...)
}

func imagePrune(ctx context.Context, args []string) error {
	var all bool
	if _, err := parseImageFlags("prune", args, func(fs *flag.FlagSet) {
		fs.BoolVar(&all, "a", false, "remove every image no sandbox uses, named ones and the build cache too")
	}); err != nil {
		return err
	}
	s, err := openImageStore()
	if err != nil {
		return err
	}
	rep, err := s.Prune(ctx, all)
	if err != nil {
		return err
	}
	fmt.Printf("removed %d images, %d layers, %d blobs (%s)\n", len(rep.Images), rep.Layers, rep.Blobs, humanBytes(rep.Bytes))
	return nil
}

func imageExport(ctx context.Context, args []string) error {
	var out string
	rest, err := parseImageFlags("export", args, func(fs *flag.FlagSet) {
		fs.StringVar(&out, "o", "", "write the tarball to `FILE` (default: stdout)")
	})
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return fmt.Errorf("want one image reference: %w", sandbox.ErrInvalid)
	}
	s, err := openImageStore()
	if err != nil {
		return err
	}
	var w io.Writer = os.Stdout
	if out != "" {
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	return s.Export(ctx, rest[0], w)
}

func humanBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}

// holdImage holds ref in the local store for the sandbox holder, pulling
// it first when the store does not have it (as docker run does).
func holdImage(ctx context.Context, ref, holder string) (*images.Rootfs, error) {
	s, err := openImageStore()
	if err != nil {
		return nil, err
	}
	r, err := s.Acquire(ctx, ref, holder, images.AcquireOptions{})
	if !errors.Is(err, sandbox.ErrNotFound) {
		return r, err
	}
	pr := newProgress(os.Stderr, "pull "+ref, false)
	_, perr := s.Pull(ctx, ref, images.PullOptions{Progress: pr.report})
	pr.finish(perr)
	if perr != nil {
		return nil, fmt.Errorf("image %q is not in the store and pulling it failed: %w", ref, perr)
	}
	return s.Acquire(ctx, ref, holder, images.AcquireOptions{})
}
