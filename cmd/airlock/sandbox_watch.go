package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/errdefs"
)

// sbWatch prints the changes under a path inside a sandbox, one line each,
// until interrupted, the path goes away or the sandbox ends.
func sbWatch(ctx context.Context, c *client.Client, args []string) int {
	fs := sbFlags("watch")
	recursive := fs.Bool("r", false, "watch the whole tree below PATH")
	asJSON := fs.Bool("json", false, "print the events as JSON lines")
	if err := fs.Parse(args); err != nil {
		return exitAirlock
	}
	if fs.NArg() != 2 {
		return fail("sandbox watch", fmt.Errorf("want ID PATH: %w", errdefs.ErrInvalid))
	}
	w, err := c.WatchFiles(ctx, fs.Arg(0), fs.Arg(1), *recursive)
	if err != nil {
		return fail("sandbox watch", err)
	}
	defer w.Close()
	fmt.Fprintf(os.Stderr, "watching %s:%s\n", fs.Arg(0), fs.Arg(1))
	enc := json.NewEncoder(os.Stdout)
	for {
		e, err := w.Next()
		switch {
		case errors.Is(err, io.EOF), err != nil && ctx.Err() != nil:
			return 0
		case err != nil:
			return fail("sandbox watch", err)
		}
		if *asJSON {
			err = enc.Encode(e)
		} else {
			_, err = fmt.Println(formatFileEvent(e))
		}
		if err != nil {
			return 0 // stdout closed (a pipe's reader left)
		}
	}
}

func formatFileEvent(e api.FileEvent) string {
	switch {
	case e.Op == "rename":
		return fmt.Sprintf("rename %s -> %s", printable(e.From), printable(e.Path))
	case e.Path == "":
		return e.Op
	}
	return e.Op + " " + printable(e.Path)
}
