package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/policy"
)

// parseVolumeMounts parses --volume NAME:PATH[:ro] entries.
func parseVolumeMounts(l []string) ([]api.VolumeMount, error) {
	var out []api.VolumeMount
	for _, v := range l {
		parts := strings.Split(v, ":")
		m := api.VolumeMount{}
		switch {
		case len(parts) == 2:
		case len(parts) == 3 && parts[2] == "ro":
			m.ReadOnly = true
		default:
			return nil, fmt.Errorf("--volume %q: want NAME:PATH or NAME:PATH:ro: %w", v, errdefs.ErrInvalid)
		}
		m.Name, m.Path = parts[0], parts[1]
		out = append(out, m)
	}
	return out, nil
}

// sbVolume manages named volumes: create NAME SIZE, ls, rm NAME...
func sbVolume(ctx context.Context, c *client.Client, args []string) int {
	if len(args) == 0 {
		return fail("sandbox volume", fmt.Errorf("want create NAME SIZE, ls [--json] or rm NAME...: %w", errdefs.ErrInvalid))
	}
	switch args[0] {
	case "create":
		if len(args) != 3 {
			return fail("sandbox volume create", fmt.Errorf("want NAME SIZE (e.g. 1Gi): %w", errdefs.ErrInvalid))
		}
		size, err := policy.ParseByteSize(args[2])
		if err != nil {
			return fail("sandbox volume create", fmt.Errorf("size %q: %w", args[2], errdefs.ErrInvalid))
		}
		if _, err := c.CreateVolume(ctx, args[1], int64(size)); err != nil {
			return fail("sandbox volume create", err)
		}
		fmt.Println(args[1])
	case "ls", "list":
		vs, err := c.Volumes(ctx)
		if err != nil {
			return fail("sandbox volume ls", err)
		}
		if len(args) > 1 && (args[1] == "--json" || args[1] == "-json") {
			printJSON(vs)
			return 0
		}
		fmt.Printf("%-24s %12s  %s\n", "NAME", "SIZE", "IN USE BY")
		for _, v := range vs {
			fmt.Printf("%-24s %12d  %s\n", v.Name, v.SizeBytes, strings.Join(v.InUse, ","))
		}
	case "rm":
		if len(args) < 2 {
			return fail("sandbox volume rm", fmt.Errorf("want NAME...: %w", errdefs.ErrInvalid))
		}
		for _, n := range args[1:] {
			if err := c.DeleteVolume(ctx, n); err != nil {
				return fail("sandbox volume rm", err)
			}
		}
	default:
		return fail("sandbox volume", fmt.Errorf("unknown command %q: want create, ls or rm: %w", args[0], errdefs.ErrInvalid))
	}
	return 0
}
