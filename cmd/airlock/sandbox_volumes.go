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

// volumeUsage is `airlock sandbox volume`'s.
const volumeUsage = `usage: airlock sandbox volume create NAME SIZE | ls [--json] | rm NAME...
  named volumes of the caller's tenant; mount one with sandbox create --volume NAME:PATH[:ro]
`

// sbVolume manages named volumes: create NAME SIZE, ls, rm NAME...
func sbVolume(ctx context.Context, c *client.Client, args []string) int {
	return dispatch("sandbox volume", volumeUsage, []subcommand{
		{[]string{"create"}, func(args []string) int {
			if len(args) != 2 {
				return fail("sandbox volume create", fmt.Errorf("want NAME SIZE (e.g. 1Gi): %w", errdefs.ErrInvalid))
			}
			size, err := policy.ParseByteSize(args[1])
			if err != nil {
				return fail("sandbox volume create", fmt.Errorf("size %q: %w", args[1], errdefs.ErrInvalid))
			}
			if _, err := c.CreateVolume(ctx, args[0], int64(size)); err != nil {
				return fail("sandbox volume create", err)
			}
			fmt.Println(args[0])
			return 0
		}},
		{[]string{"ls", "list"}, func(args []string) int {
			vs, err := c.Volumes(ctx)
			if err != nil {
				return fail("sandbox volume ls", err)
			}
			if len(args) > 0 && (args[0] == "--json" || args[0] == "-json") {
				printJSON(vs)
				return 0
			}
			fmt.Printf("%-24s %12s  %s\n", "NAME", "SIZE", "IN USE BY")
			for _, v := range vs {
				fmt.Printf("%-24s %12d  %s\n", v.Name, v.SizeBytes, strings.Join(v.InUse, ","))
			}
			return 0
		}},
		{[]string{"rm"}, func(args []string) int {
			if len(args) == 0 {
				return fail("sandbox volume rm", fmt.Errorf("want NAME...: %w", errdefs.ErrInvalid))
			}
			for _, n := range args {
				if err := c.DeleteVolume(ctx, n); err != nil {
					return fail("sandbox volume rm", err)
				}
			}
			return 0
		}},
	}, args)
}
