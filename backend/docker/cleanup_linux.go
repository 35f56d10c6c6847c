package docker

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/airlock-dev/airlock/sandbox"
)

// Cleanup removes the containers and overlay volumes of this backend's
// owner (LabelOwner) whose sandbox IDs are not in keep, and state
// directories of sandboxes that have no container. Idempotent. It never
// touches a container or volume without the owner's label.
func (b *Backend) Cleanup(ctx context.Context, keep map[string]bool) error {
	var errs []error
	live := map[string]bool{}
	if b.Info(ctx).Err == nil {
		e, err := b.engine()
		if err != nil {
			return err
		}
		f := b.ownLabels()
		list, err := e.ContainerList(ctx, f, nil)
		if err != nil {
			return fmt.Errorf("cleanup: list containers: %w", err)
		}
		for _, c := range list {
			id := c.Labels[LabelSandbox]
			if keep[id] {
				live[id] = true
				continue
			}
			b.log.Info("cleanup leftover container", "sandbox", id, "container", c.ID)
			if err := removeContainer(e, c.ID); err != nil {
				errs = append(errs, fmt.Errorf("cleanup sandbox %q: %w", id, err))
			}
		}
		vols, err := e.VolumeList(ctx, f)
		if err != nil {
			return fmt.Errorf("cleanup: list volumes: %w", errors.Join(append(errs, err)...))
		}
		for _, v := range vols {
			if id := v.Labels[LabelSandbox]; !keep[id] {
				if err := e.VolumeRemove(ctx, v.Name); err != nil && !notFound(err) {
					errs = append(errs, fmt.Errorf("cleanup sandbox %q: volume %s: %w", id, v.Name, err))
				}
			}
		}
	} else if ents, _ := os.ReadDir(b.cfg.StateDir); len(ents) > 0 {
		// Without the daemon its containers cannot be found: keep their
		// state (the overlay layers may hold unsynced work) for next time.
		return fmt.Errorf("cleanup: %w", b.Info(ctx).Err)
	}
	ents, _ := os.ReadDir(b.cfg.StateDir)
	for _, ent := range ents {
		id := ent.Name()
		if keep[id] || live[id] || !sandbox.ValidID(id) {
			continue
		}
		if err := os.RemoveAll(b.stateDir(id)); err != nil {
			errs = append(errs, fmt.Errorf("cleanup sandbox %q: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// reclaimExited removes this owner's containers that have exited, with
// their volumes and state dirs: a container ends only when the airlock
// process that attached to it went away (StdinOnce) or its agent died, so
// an exited one is a dead sandbox's (a killed `airlock run`). Never a
// created or running one: that may be another process's sandbox being
// made or in use. Create runs it once per Backend, in the background.
func (b *Backend) reclaimExited(ctx context.Context) {
	e, err := b.engine()
	if err != nil {
		return
	}
	list, err := e.ContainerList(ctx, b.ownLabels(), []string{"exited", "dead"})
	if err != nil {
		b.log.Debug("reclaim: list containers", "err", err)
		return
	}
	for _, c := range list {
		id := c.Labels[LabelSandbox]
		b.log.Info("reclaim a dead sandbox's container", "sandbox", id, "container", c.ID)
		if err := removeContainer(e, c.ID); err != nil {
			b.log.Warn("reclaim", "sandbox", id, "err", err)
			continue
		}
		if sandbox.ValidID(id) {
			os.RemoveAll(b.stateDir(id))
		}
	}
}

// ownLabels are the label filters of this Backend's containers and volumes.
func (b *Backend) ownLabels() []string {
	return []string{LabelOwner + "=" + b.cfg.Owner, LabelBackend + "=" + Name}
}
