package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/sandbox"
)

// sbPauseResume is `airlock sandbox pause [--memory]|resume ID...`.
func sbPauseResume(ctx context.Context, c *client.Client, sub string, args []string) int {
	memory := false
	if sub == "pause" && len(args) > 0 && (args[0] == "--memory" || args[0] == "-memory") {
		memory, args = true, args[1:]
	}
	if len(args) == 0 {
		return fail("sandbox "+sub, fmt.Errorf("want sandbox IDs: %w", sandbox.ErrInvalid))
	}
	code := 0
	for _, id := range args {
		var err error
		switch {
		case memory:
			_, err = c.Freeze(ctx, id)
		case sub == "pause":
			_, err = c.Pause(ctx, id)
		default:
			_, err = c.Resume(ctx, id)
		}
		if err != nil {
			code = fail("sandbox "+sub, err)
			continue
		}
		fmt.Println(id)
	}
	return code
}

// sbCheckpoint is `airlock sandbox checkpoint [ls|rm] ...`.
func sbCheckpoint(ctx context.Context, c *client.Client, args []string) int {
	if len(args) > 0 && (args[0] == "ls" || args[0] == "list") {
		return sbCheckpointList(ctx, c, args[1:])
	}
	if len(args) > 0 && args[0] == "rm" {
		if len(args) != 3 {
			return fail("sandbox checkpoint rm", fmt.Errorf("want a sandbox ID and a checkpoint ID: %w", sandbox.ErrInvalid))
		}
		if err := c.DeleteCheckpoint(ctx, args[1], args[2]); err != nil {
			return fail("sandbox checkpoint rm", err)
		}
		fmt.Println(args[2])
		return 0
	}
	fs := sbFlags("checkpoint")
	name := fs.String("name", "", "a name for the checkpoint")
	asJSON := fs.Bool("json", false, "print the checkpoint as JSON")
	if err := fs.Parse(args); err != nil {
		return exitAirlock
	}
	if fs.NArg() != 1 {
		return fail("sandbox checkpoint", fmt.Errorf("want one sandbox ID: %w", sandbox.ErrInvalid))
	}
	cp, err := c.Checkpoint(ctx, fs.Arg(0), *name)
	if err != nil {
		return fail("sandbox checkpoint", err)
	}
	if *asJSON {
		printJSON(cp)
	} else {
		fmt.Println(cp.ID)
	}
	return 0
}

func sbCheckpointList(ctx context.Context, c *client.Client, args []string) int {
	fs := sbFlags("checkpoint ls")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return exitAirlock
	}
	if fs.NArg() != 1 {
		return fail("sandbox checkpoint ls", fmt.Errorf("want one sandbox ID: %w", sandbox.ErrInvalid))
	}
	cps, err := c.Checkpoints(ctx, fs.Arg(0))
	if err != nil {
		return fail("sandbox checkpoint ls", err)
	}
	if *asJSON {
		printJSON(cps)
		return 0
	}
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tCREATED\tFILES\tBYTES\tNEW BYTES")
	for _, cp := range cps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\n", cp.ID, cp.Name, cp.CreatedAt.Local().Format("15:04:05"), cp.Files, cp.Bytes, cp.NewBytes)
	}
	tw.Flush()
	return 0
}

// sbRollback is `airlock sandbox rollback ID CHECKPOINT`.
func sbRollback(ctx context.Context, c *client.Client, args []string) int {
	if len(args) != 2 {
		return fail("sandbox rollback", fmt.Errorf("want a sandbox ID and a checkpoint ID: %w", sandbox.ErrInvalid))
	}
	if _, err := c.Rollback(ctx, args[0], args[1]); err != nil {
		return fail("sandbox rollback", err)
	}
	fmt.Println(args[0])
	return 0
}
