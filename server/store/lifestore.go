package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/sandbox"
)

// LifeRow is what a sandbox is resumed from (table lifecycle): the create
// request it was made by (re-planned on resume, so today's ceilings
// apply), whether it came over the trusted socket, and the host ids its
// files belong to (the id range of its last run).
type LifeRow struct {
	Request    []byte
	Trusted    bool
	AutoResume bool
	KeepWhile  string
	KeepIdle   time.Duration
	OwnerUID   int
	OwnerGID   int
	// Manifest is the sha256 of the manifest a pause recorded of the
	// workspace ("" after a crash or while running).
	Manifest string
	// Image is an image sandbox's image ID ("" none): its resume and a
	// restarted server hold that image, whatever its tag names since.
	Image string
}

// PutLifecycle stores (replaces) sandbox id's lifecycle row.
func (s *Store) PutLifecycle(ctx context.Context, id string, r *LifeRow) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO lifecycle (id, request, trusted, auto_resume, keep_while, keep_idle, owner_uid, owner_gid, manifest, image)
		VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT(id) DO UPDATE SET request = excluded.request, trusted = excluded.trusted,
		auto_resume = excluded.auto_resume, keep_while = excluded.keep_while, keep_idle = excluded.keep_idle,
		owner_uid = excluded.owner_uid, owner_gid = excluded.owner_gid, manifest = excluded.manifest, image = excluded.image`,
		id, string(r.Request), r.Trusted, r.AutoResume, r.KeepWhile, int64(r.KeepIdle), r.OwnerUID, r.OwnerGID, r.Manifest, r.Image)
	if err != nil {
		return fmt.Errorf("store lifecycle of %q: %w", id, err)
	}
	return nil
}

// GetLifecycle returns sandbox id's lifecycle row; ErrNotFound when it has
// none (a sandbox that cannot be paused).
func (s *Store) GetLifecycle(ctx context.Context, id string) (*LifeRow, error) {
	var r LifeRow
	var req string
	var idle int64
	err := s.db.QueryRowContext(ctx, `SELECT request, trusted, auto_resume, keep_while, keep_idle, owner_uid, owner_gid, manifest, image
		FROM lifecycle WHERE id = ?`, id).Scan(&req, &r.Trusted, &r.AutoResume, &r.KeepWhile, &idle, &r.OwnerUID, &r.OwnerGID, &r.Manifest, &r.Image)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sandbox %q: no lifecycle record: %w", id, sandbox.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get lifecycle of %q: %w", id, err)
	}
	r.Request, r.KeepIdle = []byte(req), time.Duration(idle)
	return &r, nil
}

// MarkPaused records that sandbox id is paused (its processes gone, its
// files kept), why, and the manifest its files were left with.
func (s *Store) MarkPaused(ctx context.Context, id, reason, manifest string, at time.Time) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store sandbox %q: %w", id, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE sandboxes SET state = ?, reason = ?, ended_at = ? WHERE id = ?`,
		StatePaused, reason, unixOrZero(at), id); err != nil {
		return fmt.Errorf("store sandbox %q: %w", id, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE lifecycle SET manifest = ? WHERE id = ?`, manifest, id); err != nil {
		return fmt.Errorf("store sandbox %q: %w", id, err)
	}
	return tx.Commit()
}

// MarkResumed records that paused sandbox id runs again until expires,
// its files now the host ids uid:gid's.
func (s *Store) MarkResumed(ctx context.Context, id string, expires time.Time, uid, gid int) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store sandbox %q: %w", id, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE sandboxes SET state = ?, reason = '', ended_at = 0, expires_at = ? WHERE id = ?`,
		StateRunning, unixOrZero(expires), id); err != nil {
		return fmt.Errorf("store sandbox %q: %w", id, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE lifecycle SET manifest = '', owner_uid = ?, owner_gid = ? WHERE id = ?`, uid, gid, id); err != nil {
		return fmt.Errorf("store sandbox %q: %w", id, err)
	}
	return tx.Commit()
}

// MarkCrashedPaused marks the running keep-alive sandboxes that can be
// paused as paused (a server that crashed could not pause them itself)
// and returns their IDs. Run before MarkAllStopped.
func (s *Store) MarkCrashedPaused(ctx context.Context, reason string, at time.Time) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `UPDATE sandboxes SET state = ?, reason = ?, ended_at = ?
		WHERE state = ? AND (keep_alive = 1 OR id IN (SELECT id FROM lifecycle WHERE keep_while <> ''))
		AND id IN (SELECT id FROM lifecycle) RETURNING id`, StatePaused, reason, unixOrZero(at), StateRunning)
	if err != nil {
		return nil, fmt.Errorf("reconcile store: %w", err)
	}
	return scanIDs(rows)
}

// PausedIDs returns every paused sandbox's ID.
func (s *Store) PausedIDs(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM sandboxes WHERE state = ?`, StatePaused)
	if err != nil {
		return nil, fmt.Errorf("list paused sandboxes: %w", err)
	}
	return scanIDs(rows)
}

// pausedRow is a paused sandbox as quotas and the paused retention see it.
type pausedRow struct {
	ID, Tenant string
	Memory     int64
	PausedAt   time.Time
}

// ListPaused returns every paused sandbox.
func (s *Store) ListPaused(ctx context.Context) ([]pausedRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, tenant, memory, ended_at FROM sandboxes WHERE state = ?`, StatePaused)
	if err != nil {
		return nil, fmt.Errorf("list paused sandboxes: %w", err)
	}
	defer rows.Close()
	var out []pausedRow
	for rows.Next() {
		var p pausedRow
		var at int64
		if err := rows.Scan(&p.ID, &p.Tenant, &p.Memory, &at); err != nil {
			return nil, fmt.Errorf("list paused sandboxes: %w", err)
		}
		p.PausedAt = timeOrZero(at)
		out = append(out, p)
	}
	return out, rows.Err()
}

func scanIDs(rows *sql.Rows) ([]string, error) {
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// ForgetLifecycle deletes sandbox id's lifecycle and checkpoint rows (it
// was destroyed: its files are gone).
func (s *Store) ForgetLifecycle(ctx context.Context, id string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM checkpoints WHERE sandbox = ?`, id)
	if err == nil {
		_, err = s.db.ExecContext(ctx, `DELETE FROM lifecycle WHERE id = ?`, id)
	}
	if err != nil {
		return fmt.Errorf("forget lifecycle of %q: %w", id, err)
	}
	return nil
}

// InsertCheckpoint adds checkpoint c of tenant.
func (s *Store) InsertCheckpoint(ctx context.Context, tenant string, c api.Checkpoint) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO checkpoints (id, sandbox, tenant, name, created_at, files, bytes, new_bytes, skipped, manifest)
		VALUES (?,?,?,?,?,?,?,?,?,?)`, c.ID, c.Sandbox, tenant, c.Name, unixOrZero(c.CreatedAt), c.Files, c.Bytes, c.NewBytes, c.Skipped, c.Manifest)
	if err != nil {
		return fmt.Errorf("store checkpoint %q: %w", c.ID, err)
	}
	return nil
}

const checkpointCols = `id, sandbox, name, created_at, files, bytes, new_bytes, skipped, manifest`

func scanCheckpoint(sc interface{ Scan(...any) error }) (api.Checkpoint, error) {
	var c api.Checkpoint
	var at int64
	err := sc.Scan(&c.ID, &c.Sandbox, &c.Name, &at, &c.Files, &c.Bytes, &c.NewBytes, &c.Skipped, &c.Manifest)
	c.CreatedAt = timeOrZero(at)
	return c, err
}

// ListCheckpoints returns sandbox id's checkpoints, oldest first.
func (s *Store) ListCheckpoints(ctx context.Context, id string) ([]api.Checkpoint, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+checkpointCols+` FROM checkpoints WHERE sandbox = ? ORDER BY created_at, id`, id)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of %q: %w", id, err)
	}
	defer rows.Close()
	out := []api.Checkpoint{}
	for rows.Next() {
		c, err := scanCheckpoint(rows)
		if err != nil {
			return nil, fmt.Errorf("list checkpoints of %q: %w", id, err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// GetCheckpoint returns checkpoint cp of sandbox id; ErrNotFound if the
// sandbox has none of that ID.
func (s *Store) GetCheckpoint(ctx context.Context, id, cp string) (api.Checkpoint, error) {
	c, err := scanCheckpoint(s.db.QueryRowContext(ctx, `SELECT `+checkpointCols+` FROM checkpoints WHERE sandbox = ? AND id = ?`, id, cp))
	if errors.Is(err, sql.ErrNoRows) {
		return c, fmt.Errorf("sandbox %q: checkpoint %q: %w", id, cp, sandbox.ErrNotFound)
	}
	if err != nil {
		return c, fmt.Errorf("get checkpoint %q: %w", cp, err)
	}
	return c, nil
}

// DeleteCheckpoint forgets checkpoint cp of sandbox id.
func (s *Store) DeleteCheckpoint(ctx context.Context, id, cp string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM checkpoints WHERE sandbox = ? AND id = ?`, id, cp)
	if err != nil {
		return fmt.Errorf("delete checkpoint %q: %w", cp, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("sandbox %q: checkpoint %q: %w", id, cp, sandbox.ErrNotFound)
	}
	return nil
}

// CheckpointUsage returns how many checkpoints and snapshots tenant holds
// and their bytes (one quota bounds both).
func (s *Store) CheckpointUsage(ctx context.Context, tenant string) (int, int64, error) {
	var n int
	var b int64
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM
		(SELECT bytes FROM checkpoints WHERE tenant = ? UNION ALL SELECT bytes FROM snapshots WHERE tenant = ?)`, tenant, tenant).Scan(&n, &b)
	if err != nil {
		return 0, 0, fmt.Errorf("checkpoint usage of %q: %w", tenant, err)
	}
	return n, b, nil
}

// StoredDisk returns what tenant holds on the server's disk outside its
// sandboxes: its named volumes' sizes (an image may grow to its size)
// and its snapshots' stored bytes.
func (s *Store) StoredDisk(ctx context.Context, tenant string) (int64, error) {
	var b int64
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(n), 0) FROM
		(SELECT size AS n FROM volumes WHERE tenant = ? UNION ALL SELECT disk AS n FROM snapshots WHERE tenant = ?)`, tenant, tenant).Scan(&b)
	if err != nil {
		return 0, fmt.Errorf("disk usage of %q: %w", tenant, err)
	}
	return b, nil
}
