package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/sandbox"
)

// SnapRow is a snapshot as stored: what the API shows and what a sandbox
// is created from (the request its source was made by, re-planned so
// today's ceilings apply, and the host ids its files belong to).
type SnapRow struct {
	api.Snapshot
	Tenant   string
	ImageID  string // an image sandbox's image ID: held while the snapshot lives
	Request  []byte
	Trusted  bool
	OwnerUID int
	OwnerGID int
	Disk     int64 // what its files take on the data disk (a disk quota counts it)
}

// InsertSnapshot adds r; a name the tenant already gave another snapshot
// is refused (ErrExists).
func (s *Store) InsertSnapshot(ctx context.Context, r *SnapRow) error {
	cp, err := json.Marshal(r.Copy)
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO snapshots (id, tenant, name, sandbox, backend, image, image_id, request, trusted,
		owner_uid, owner_gid, created_at, files, bytes, copy, disk) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		r.ID, r.Tenant, r.Name, r.Sandbox, r.Backend, r.Image, r.ImageID, string(r.Request), r.Trusted,
		r.OwnerUID, r.OwnerGID, unixOrZero(r.CreatedAt), r.Files, r.Bytes, string(cp), r.Disk)
	if err != nil && strings.Contains(err.Error(), "UNIQUE") {
		return fmt.Errorf("snapshot name %q: the tenant has a snapshot of that name: %w", r.Name, sandbox.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("store snapshot %q: %w", r.ID, err)
	}
	return nil
}

const snapCols = `id, tenant, name, sandbox, backend, image, image_id, request, trusted, owner_uid, owner_gid, created_at, files, bytes, copy, disk`

func scanSnapshot(sc interface{ Scan(...any) error }) (*SnapRow, error) {
	var r SnapRow
	var at int64
	var req, cp string
	err := sc.Scan(&r.ID, &r.Tenant, &r.Name, &r.Sandbox, &r.Backend, &r.Image, &r.ImageID, &req, &r.Trusted,
		&r.OwnerUID, &r.OwnerGID, &at, &r.Files, &r.Bytes, &cp, &r.Disk)
	if err != nil {
		return nil, err
	}
	r.CreatedAt, r.Request = timeOrZero(at), []byte(req)
	if err := json.Unmarshal([]byte(cp), &r.Copy); err != nil {
		return nil, fmt.Errorf("snapshot %q: copy report: %w", r.ID, err)
	}
	return &r, nil
}

// GetSnapshot returns tenant's snapshot ref (its ID or its name).
func (s *Store) GetSnapshot(ctx context.Context, tenant, ref string) (*SnapRow, error) {
	r, err := scanSnapshot(s.db.QueryRowContext(ctx, `SELECT `+snapCols+` FROM snapshots
		WHERE tenant = ? AND (id = ? OR (name <> '' AND name = ?))`, tenant, ref, ref))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("snapshot %q: %w", ref, sandbox.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get snapshot %q: %w", ref, err)
	}
	return r, nil
}

// ListSnapshots returns tenant's snapshots, oldest first; of sandbox
// id's only when id is set.
func (s *Store) ListSnapshots(ctx context.Context, tenant, id string) ([]*SnapRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+snapCols+` FROM snapshots
		WHERE tenant = ? AND (? = '' OR sandbox = ?) ORDER BY created_at, id`, tenant, id, id)
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	defer rows.Close()
	var out []*SnapRow
	for rows.Next() {
		r, err := scanSnapshot(rows)
		if err != nil {
			return nil, fmt.Errorf("list snapshots: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// AllSnapshots returns every tenant's snapshots (reconcile keeps their
// files and holds their images).
func (s *Store) AllSnapshots(ctx context.Context) ([]*SnapRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+snapCols+` FROM snapshots`)
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	defer rows.Close()
	var out []*SnapRow
	for rows.Next() {
		r, err := scanSnapshot(rows)
		if err != nil {
			return nil, fmt.Errorf("list snapshots: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// DeleteSnapshot forgets tenant's snapshot id.
func (s *Store) DeleteSnapshot(ctx context.Context, tenant, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM snapshots WHERE tenant = ? AND id = ?`, tenant, id)
	if err != nil {
		return fmt.Errorf("delete snapshot %q: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("snapshot %q: %w", id, sandbox.ErrNotFound)
	}
	return nil
}
