package gvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/backend/internal/hostfs"
	"github.com/airlock-dev/airlock/internal/imageroot"
	"github.com/airlock-dev/airlock/sandbox"
)

// Cleanup removes the runsc containers, cgroups, bundles and workspace
// placeholders of sandboxes under this backend's state dir whose IDs are
// not in keep. Idempotent.
func (b *Backend) Cleanup(ctx context.Context, keep map[string]bool) error {
	ids := map[string]bool{}
	if out, err := b.runsc(ctx, "list", "--format=json"); err == nil {
		var list []struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(out, &list) == nil {
			for _, c := range list {
				ids[c.ID] = true
			}
		}
	} else if b.Info(ctx).Path != "" {
		b.log.Warn("runsc list", "err", err)
	}
	// State files of containers runsc no longer lists (a crash mid-create).
	if m, _ := filepath.Glob(filepath.Join(b.runscRoot(), "*_sandbox:*")); len(m) > 0 {
		for _, f := range m {
			id, _, _ := strings.Cut(filepath.Base(f), "_sandbox:")
			ids[id] = true
		}
	}
	if ents, err := os.ReadDir(b.bundleRoot()); err == nil {
		for _, e := range ents {
			ids[e.Name()] = true
		}
	}
	var errs []error
	for id := range ids {
		if keep[id] || !sandbox.ValidID(id) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		b.log.Info("cleanup leftover sandbox", "sandbox", id)
		if b.hasState(id) {
			b.runsc(ctx, "kill", "--all", id, "KILL")
			if _, err := b.runsc(ctx, "delete", "--force", id); err != nil && b.hasState(id) {
				errs = append(errs, fmt.Errorf("cleanup sandbox %q: %w", id, err))
			}
		}
		if err := newSandboxCgroup(b.cfg.CgroupParent + "/" + id).remove(); err != nil {
			errs = append(errs, fmt.Errorf("cleanup sandbox %q: %w", id, err))
		}
		dir := b.bundleDir(id)
		if err := hostfs.RemovePlaceholders(readPlaceholders(dir)); err != nil {
			errs = append(errs, fmt.Errorf("cleanup sandbox %q: placeholders: %w", id, err))
		}
		if err := b.unmountImageRoot(dir, id); err != nil {
			errs = append(errs, fmt.Errorf("cleanup sandbox %q: %w", id, err))
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("cleanup sandbox %q: %w", id, err))
		}
	}
	// Writable layers whose sandbox left nothing else (killed between
	// making the layer and the bundle).
	if err := imageroot.Sweep(b.cfg.WritableDir, keep, func(id string) bool { return ids[id] && keep[id] }); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
