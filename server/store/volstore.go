package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

// VolumeRecord is a named volume's row.
type VolumeRecord struct {
	ID, Tenant, Name string
	Size             int64
	CreatedAt        time.Time
}

// InsertVolume adds v; ErrExists when the tenant has one of that name.
func (s *Store) InsertVolume(ctx context.Context, v *VolumeRecord) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO volumes(id, tenant, name, size, created_at) VALUES (?, ?, ?, ?, ?)`,
		v.ID, v.Tenant, v.Name, v.Size, v.CreatedAt.UnixNano())
	if err != nil && strings.Contains(err.Error(), "UNIQUE") {
		return fmt.Errorf("volume %q: %w", v.Name, sandbox.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("store: insert volume %q: %w", v.Name, err)
	}
	return nil
}

// GetVolume returns tenant's volume name; ErrNotFound for none (another
// tenant's included).
func (s *Store) GetVolume(ctx context.Context, tenant, name string) (*VolumeRecord, error) {
	v := &VolumeRecord{Tenant: tenant, Name: name}
	var created int64
	err := s.db.QueryRowContext(ctx, `SELECT id, size, created_at FROM volumes WHERE tenant = ? AND name = ?`, tenant, name).
		Scan(&v.ID, &v.Size, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("volume %q: %w", name, sandbox.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get volume %q: %w", name, err)
	}
	v.CreatedAt = time.Unix(0, created).UTC()
	return v, nil
}

// ListVolumes returns tenant's volumes by name.
func (s *Store) ListVolumes(ctx context.Context, tenant string) ([]VolumeRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, name, size, created_at FROM volumes WHERE tenant = ? ORDER BY name`, tenant)
	if err != nil {
		return nil, fmt.Errorf("store: list volumes: %w", err)
	}
	defer rows.Close()
	var out []VolumeRecord
	for rows.Next() {
		v := VolumeRecord{Tenant: tenant}
		var created int64
		if err := rows.Scan(&v.ID, &v.Name, &v.Size, &created); err != nil {
			return nil, fmt.Errorf("store: list volumes: %w", err)
		}
		v.CreatedAt = time.Unix(0, created).UTC()
		out = append(out, v)
	}
	return out, rows.Err()
}

// DeleteVolume removes the row of volume id.
func (s *Store) DeleteVolume(ctx context.Context, id string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM volumes WHERE id = ?`, id); err != nil {
		return fmt.Errorf("store: delete volume: %w", err)
	}
	return nil
}

// VolumeIDs returns the IDs of every tenant's volumes (the files to keep).
func (s *Store) VolumeIDs(ctx context.Context) (map[string]bool, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM volumes`)
	if err != nil {
		return nil, fmt.Errorf("store: volume ids: %w", err)
	}
	defer rows.Close()
	ids := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids[id] = true
	}
	return ids, rows.Err()
}
