// Package store is the server's SQLite database (airlock.db in the data
// directory): sandboxes, API keys, tenant quotas, audit events, named
// volumes, what a paused sandbox resumes from, checkpoints and snapshots.
// It only persists: it never decides whether a request is allowed, never
// touches a sandbox or its files, and knows nothing of HTTP. Migrations are
// append-only; a released one is never edited.
package store

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/sandbox"

	_ "modernc.org/sqlite" // pure-Go driver: the binary stays static
)

// Store is the server's SQLite database: sandboxes, API keys, tenant quotas
// and audit events. Safe for concurrent use.
type Store struct {
	db *sql.DB
	// Prepared hot statements: SQLite parsing costs more than the writes.
	insertSB, markStopped, getSB, authKey, getQuota, updateLife, insertEvent *sql.Stmt
}

// migrations are applied in order; the index+1 is the schema version. Never
// edit a released migration, append a new one.
var migrations = []string{
	`CREATE TABLE sandboxes (
		id          TEXT PRIMARY KEY,
		tenant      TEXT NOT NULL,
		backend     TEXT NOT NULL,
		profile     TEXT NOT NULL DEFAULT '',
		image       TEXT NOT NULL DEFAULT '',
		spec        TEXT NOT NULL,
		labels      TEXT NOT NULL DEFAULT '{}',
		env         TEXT NOT NULL DEFAULT '{}',
		state       TEXT NOT NULL,
		reason      TEXT NOT NULL DEFAULT '',
		memory      INTEGER NOT NULL DEFAULT 0,
		keep_alive  INTEGER NOT NULL DEFAULT 0,
		created_at  INTEGER NOT NULL,
		expires_at  INTEGER NOT NULL DEFAULT 0,
		ended_at    INTEGER NOT NULL DEFAULT 0
	);
	CREATE INDEX sandboxes_tenant_state ON sandboxes(tenant, state);
	CREATE TABLE api_keys (
		id         TEXT PRIMARY KEY,
		tenant     TEXT NOT NULL,
		name       TEXT NOT NULL DEFAULT '',
		hash       BLOB NOT NULL UNIQUE,
		created_at INTEGER NOT NULL,
		revoked_at INTEGER NOT NULL DEFAULT 0
	);
	CREATE TABLE quotas (
		tenant        TEXT PRIMARY KEY,
		max_sandboxes INTEGER NOT NULL DEFAULT 0,
		max_memory    INTEGER NOT NULL DEFAULT 0
	);
	CREATE TABLE events (
		seq     INTEGER PRIMARY KEY AUTOINCREMENT,
		sandbox TEXT NOT NULL,
		time    INTEGER NOT NULL,
		type    TEXT NOT NULL,
		message TEXT NOT NULL DEFAULT '',
		fields  TEXT NOT NULL DEFAULT ''
	);
	CREATE INDEX events_sandbox_seq ON events(sandbox, seq);`,
	// Named volumes (volumes.go): their files are DataDir/named-volumes/ID.img.
	`CREATE TABLE volumes (
		id         TEXT PRIMARY KEY,
		tenant     TEXT NOT NULL,
		name       TEXT NOT NULL,
		size       INTEGER NOT NULL,
		created_at INTEGER NOT NULL,
		UNIQUE(tenant, name)
	);`,

	// Issue 15: what a paused sandbox is resumed from, and checkpoints
	// (lifestore.go).
	`CREATE TABLE lifecycle (
		id          TEXT PRIMARY KEY,
		request     TEXT NOT NULL,
		trusted     INTEGER NOT NULL DEFAULT 0,
		auto_resume INTEGER NOT NULL DEFAULT 0,
		keep_while  TEXT NOT NULL DEFAULT '',
		keep_idle   INTEGER NOT NULL DEFAULT 0,
		owner_uid   INTEGER NOT NULL DEFAULT -1,
		owner_gid   INTEGER NOT NULL DEFAULT -1,
		manifest    TEXT NOT NULL DEFAULT ''
	);
	CREATE TABLE checkpoints (
		id         TEXT PRIMARY KEY,
		sandbox    TEXT NOT NULL,
		tenant     TEXT NOT NULL,
		name       TEXT NOT NULL DEFAULT '',
		created_at INTEGER NOT NULL,
		files      INTEGER NOT NULL,
		bytes      INTEGER NOT NULL,
		new_bytes  INTEGER NOT NULL,
		skipped    INTEGER NOT NULL DEFAULT 0,
		manifest   TEXT NOT NULL
	);
	CREATE INDEX checkpoints_sandbox ON checkpoints(sandbox, created_at);
	CREATE INDEX checkpoints_tenant ON checkpoints(tenant);`,
	// A paused image sandbox's image, by ID (imagepause.go).
	`ALTER TABLE lifecycle ADD COLUMN image TEXT NOT NULL DEFAULT '';`,
	// Issue 23: snapshots, a sandbox's files and settings kept apart from
	// it (snapstore.go).
	`CREATE TABLE snapshots (
		id         TEXT PRIMARY KEY,
		tenant     TEXT NOT NULL,
		name       TEXT NOT NULL DEFAULT '',
		sandbox    TEXT NOT NULL,
		backend    TEXT NOT NULL,
		image      TEXT NOT NULL DEFAULT '',
		image_id   TEXT NOT NULL DEFAULT '',
		request    TEXT NOT NULL,
		trusted    INTEGER NOT NULL DEFAULT 0,
		owner_uid  INTEGER NOT NULL,
		owner_gid  INTEGER NOT NULL,
		created_at INTEGER NOT NULL,
		files      INTEGER NOT NULL,
		bytes      INTEGER NOT NULL,
		copy       TEXT NOT NULL DEFAULT '{}'
	);
	CREATE INDEX snapshots_tenant ON snapshots(tenant, created_at);
	CREATE UNIQUE INDEX snapshots_name ON snapshots(tenant, name) WHERE name <> '';`,
	// Issue 24: a tenant's disk quota, and what a snapshot takes on the
	// data disk (its copies' allocated blocks; bytes is their sizes).
	`ALTER TABLE quotas ADD COLUMN max_disk INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE snapshots ADD COLUMN disk INTEGER NOT NULL DEFAULT 0;`,
}

// File is the store's file name in the data directory.
const File = "airlock.db"

// Open opens (creating) dir/airlock.db in WAL mode and migrates it.
func Open(ctx context.Context, dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open store %q: %w", dir, err)
	}
	path := filepath.Join(dir, File)
	// The store holds key hashes and every tenant's events: only the
	// server's user reads it (SQLite gives its WAL and shm files the
	// database's mode).
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600); err == nil {
		f.Chmod(0o600)
		f.Close()
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		os.Chmod(path+suffix, 0o600)
	}
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open store %q: %w", path, err)
	}
	// Bounded: every authenticated request reads the store, and each
	// SQLite connection holds descriptors (which SQLite keeps open while
	// another connection holds a lock on the file): a burst of requests
	// must not grow the server's descriptors with it. Writers serialize
	// in SQLite anyway.
	db.SetMaxOpenConns(64)
	db.SetMaxIdleConns(8)
	s := &Store{db: db}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %q: %w", path, err)
	}
	if err := s.prepare(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %q: %w", path, err)
	}
	return s, nil
}

func (s *Store) prepare(ctx context.Context) error {
	for _, p := range []struct {
		st  **sql.Stmt
		sql string
	}{
		{&s.insertSB, `INSERT INTO sandboxes (` + sandboxCols + `) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`},
		{&s.markStopped, `UPDATE sandboxes SET state = ?, reason = ?, ended_at = ? WHERE id = ? AND state <> ?`},
		{&s.getSB, `SELECT ` + sandboxCols + ` FROM sandboxes WHERE id = ? AND tenant = ?`},
		{&s.authKey, `SELECT tenant, hash, revoked_at FROM api_keys WHERE hash = ?`},
		{&s.getQuota, `SELECT max_sandboxes, max_memory, max_disk FROM quotas WHERE tenant = ?`},
		{&s.updateLife, `UPDATE sandboxes SET expires_at = ?, keep_alive = ? WHERE id = ?`},
		{&s.insertEvent, `INSERT INTO events (sandbox, time, type, message, fields) VALUES (?,?,?,?,?)`},
	} {
		st, err := s.db.PrepareContext(ctx, p.sql)
		if err != nil {
			return err
		}
		*p.st = st
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return err
	}
	var v int
	err = tx.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version(version) VALUES (0)`); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	if v > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this build (%d): %w", v, len(migrations), sandbox.ErrUnavailable)
	}
	for i := v; i < len(migrations); i++ {
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE schema_version SET version = ?`, len(migrations)); err != nil {
		return err
	}
	return tx.Commit()
}

// Sandbox states as stored.
const (
	StateRunning = "running"
	StateStopped = "stopped"
	StatePaused  = api.StatePaused
)

// Record is one sandbox row.
type Record struct {
	ID        string            `json:"id"`
	Tenant    string            `json:"tenant"`
	Backend   string            `json:"backend"`
	Profile   string            `json:"profile,omitempty"`
	Image     string            `json:"image,omitempty"`
	Spec      json.RawMessage   `json:"policy"`
	Labels    map[string]string `json:"labels,omitempty"`
	Env       map[string]string `json:"-"`
	State     string            `json:"state"`
	Reason    string            `json:"reason,omitempty"`
	Memory    int64             `json:"memory_bytes,omitempty"`
	KeepAlive bool              `json:"keep_alive"`
	CreatedAt time.Time         `json:"created_at"`
	ExpiresAt time.Time         `json:"expires_at,omitzero"`
	EndedAt   time.Time         `json:"ended_at,omitzero"`
}

func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func timeOrZero(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// InsertSandbox adds r.
func (s *Store) InsertSandbox(ctx context.Context, r *Record) error {
	labels, err := json.Marshal(r.Labels)
	if err != nil {
		return fmt.Errorf("store sandbox %q: labels: %w", r.ID, err)
	}
	env, err := json.Marshal(r.Env)
	if err != nil {
		return fmt.Errorf("store sandbox %q: env: %w", r.ID, err)
	}
	_, err = s.insertSB.ExecContext(ctx,
		r.ID, r.Tenant, r.Backend, r.Profile, r.Image, string(r.Spec), string(labels), string(env), r.State, r.Reason,
		r.Memory, r.KeepAlive, unixOrZero(r.CreatedAt), unixOrZero(r.ExpiresAt), unixOrZero(r.EndedAt))
	if err != nil {
		return fmt.Errorf("store sandbox %q: %w", r.ID, err)
	}
	return nil
}

// UpdateLifetime stores r's expiry and keep-alive.
func (s *Store) UpdateLifetime(ctx context.Context, id string, expires time.Time, keepAlive bool) error {
	_, err := s.updateLife.ExecContext(ctx, unixOrZero(expires), keepAlive, id)
	if err != nil {
		return fmt.Errorf("store sandbox %q: %w", id, err)
	}
	return nil
}

// MarkStopped records that sandbox id ended, and why.
func (s *Store) MarkStopped(ctx context.Context, id, reason string, at time.Time) error {
	_, err := s.markStopped.ExecContext(ctx, StateStopped, reason, unixOrZero(at), id, StateStopped)
	if err != nil {
		return fmt.Errorf("store sandbox %q: %w", id, err)
	}
	return nil
}

// MarkAllStopped marks every sandbox still running as stopped and returns
// their IDs: used at start-up, since no process survives the server
// (paused sandboxes stay paused; MarkCrashedPaused runs first). One
// statement (UPDATE ... RETURNING), so the IDs are exactly the rows it
// changed, whatever else writes meanwhile.
func (s *Store) MarkAllStopped(ctx context.Context, reason string, at time.Time) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `UPDATE sandboxes SET state = ?, reason = ?, ended_at = ? WHERE state NOT IN (?, ?) RETURNING id`,
		StateStopped, reason, unixOrZero(at), StateStopped, StatePaused)
	if err != nil {
		return nil, fmt.Errorf("reconcile store: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("reconcile store: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reconcile store: %w", err)
	}
	return ids, nil
}

const sandboxCols = `id, tenant, backend, profile, image, spec, labels, env, state, reason, memory, keep_alive, created_at, expires_at, ended_at`

func scanRecord(sc interface{ Scan(...any) error }) (*Record, error) {
	var r Record
	var spec, labels, env string
	var created, expires, ended int64
	if err := sc.Scan(&r.ID, &r.Tenant, &r.Backend, &r.Profile, &r.Image, &spec, &labels, &env, &r.State, &r.Reason,
		&r.Memory, &r.KeepAlive, &created, &expires, &ended); err != nil {
		return nil, err
	}
	r.Spec = json.RawMessage(spec)
	if err := json.Unmarshal([]byte(labels), &r.Labels); err != nil {
		return nil, fmt.Errorf("sandbox %q: decode labels: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(env), &r.Env); err != nil {
		return nil, fmt.Errorf("sandbox %q: decode env: %w", r.ID, err)
	}
	r.CreatedAt, r.ExpiresAt, r.EndedAt = timeOrZero(created), timeOrZero(expires), timeOrZero(ended)
	return &r, nil
}

// GetSandbox returns sandbox id of tenant; ErrNotFound when it does not
// exist or belongs to another tenant.
func (s *Store) GetSandbox(ctx context.Context, tenant, id string) (*Record, error) {
	r, err := scanRecord(s.getSB.QueryRowContext(ctx, id, tenant))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sandbox %q: %w", id, sandbox.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get sandbox %q: %w", id, err)
	}
	return r, nil
}

// ListFilter selects sandboxes.
type ListFilter struct {
	Tenant string
	State  string            // "" = any
	Labels map[string]string // all must match
	Limit  int
}

// ListSandboxes returns tenant's sandboxes, newest first.
func (s *Store) ListSandboxes(ctx context.Context, f ListFilter) ([]*Record, error) {
	q := `SELECT ` + sandboxCols + ` FROM sandboxes WHERE tenant = ?`
	args := []any{f.Tenant}
	if f.State != "" {
		q += ` AND state = ?`
		args = append(args, f.State)
	}
	for k, v := range f.Labels {
		q += ` AND json_extract(labels, ?) = ?`
		args = append(args, "$."+jsonPathKey(k), v)
	}
	q += ` ORDER BY created_at DESC`
	if f.Limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, f.Limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	defer rows.Close()
	var out []*Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("list sandboxes: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// jsonPathKey quotes a label key for a JSON path: "$.\"k\"".
func jsonPathKey(k string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(k) + `"`
}

// CountRunning returns the number of sandboxes in state running per ID set.
func (s *Store) CountByState(ctx context.Context) (map[[2]string]int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT state, backend, COUNT(*) FROM sandboxes GROUP BY state, backend`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[[2]string]int{}
	for rows.Next() {
		var st, be string
		var n int
		if err := rows.Scan(&st, &be, &n); err != nil {
			return nil, err
		}
		out[[2]string{st, be}] = n
	}
	return out, rows.Err()
}

// API keys.

// LocalTenant is the tenant of requests on the trusted unix socket that
// carry no API key.
const LocalTenant = "local"

// KeyPrefix starts every API key, so leaked keys are recognisable.
const KeyPrefix = "alk_"

func hashKey(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// AddKey stores the hash of key for tenant and returns the key's ID.
func (s *Store) AddKey(ctx context.Context, tenant, name, key string) (string, error) {
	if !validTenant(tenant) {
		return "", fmt.Errorf("add key: tenant %q: %w", tenant, sandbox.ErrInvalid)
	}
	if tenant == LocalTenant {
		// Its sandboxes are the unix socket's (the operator's, who may
		// name host paths): no key may act for it.
		return "", fmt.Errorf("add key: tenant %q is the unix socket's own; pick another name: %w", tenant, sandbox.ErrInvalid)
	}
	h := hashKey(key)
	id := fmt.Sprintf("key-%x", h[:6])
	_, err := s.db.ExecContext(ctx, `INSERT INTO api_keys (id, tenant, name, hash, created_at) VALUES (?,?,?,?,?)`,
		id, tenant, name, h, time.Now().UnixNano())
	if err != nil {
		return "", fmt.Errorf("add key for tenant %q: %w", tenant, err)
	}
	return id, nil
}

// RevokeKey revokes key id.
func (s *Store) RevokeKey(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at = 0`, time.Now().UnixNano(), id)
	if err != nil {
		return fmt.Errorf("revoke key %q: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("revoke key %q: %w", id, sandbox.ErrNotFound)
	}
	return nil
}

// KeyInfo describes a stored key (never the key itself).
type KeyInfo struct {
	ID        string    `json:"id"`
	Tenant    string    `json:"tenant"`
	Name      string    `json:"name,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Revoked   bool      `json:"revoked"`
}

// ListKeys lists stored keys.
func (s *Store) ListKeys(ctx context.Context) ([]KeyInfo, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, tenant, name, created_at, revoked_at FROM api_keys ORDER BY created_at`)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	defer rows.Close()
	var out []KeyInfo
	for rows.Next() {
		var k KeyInfo
		var c, r int64
		if err := rows.Scan(&k.ID, &k.Tenant, &k.Name, &c, &r); err != nil {
			return nil, err
		}
		k.CreatedAt, k.Revoked = timeOrZero(c), r != 0
		out = append(out, k)
	}
	return out, rows.Err()
}

// Authenticate returns the tenant of key, or ErrPermission.
func (s *Store) Authenticate(ctx context.Context, key string) (string, error) {
	deny := fmt.Errorf("authenticate: invalid API key: %w", sandbox.ErrPermission)
	if !strings.HasPrefix(key, KeyPrefix) || len(key) > 200 {
		return "", deny
	}
	h := hashKey(key)
	var tenant string
	var stored []byte
	var revoked int64
	err := s.authKey.QueryRowContext(ctx, h).Scan(&tenant, &stored, &revoked)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return "", deny
		}
		return "", fmt.Errorf("authenticate: %w", err)
	}
	// The lookup is by hash already; the constant-time compare keeps the
	// decision itself free of early exits on the secret-derived bytes.
	if subtle.ConstantTimeCompare(stored, h) != 1 || revoked != 0 {
		return "", deny
	}
	return tenant, nil
}

// Quota is a tenant's limit; zero fields mean the server default.
type Quota struct {
	MaxSandboxes int   `json:"max_sandboxes"`
	MaxMemory    int64 `json:"max_memory_bytes"`
	// MaxDisk bounds what the tenant holds on the server's disk: its
	// sandboxes' limits.disk (paused ones included), its named volumes'
	// sizes and its snapshots' stored bytes.
	MaxDisk int64 `json:"max_disk_bytes"`
}

// SetQuota stores tenant's quota.
func (s *Store) SetQuota(ctx context.Context, tenant string, q Quota) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO quotas (tenant, max_sandboxes, max_memory, max_disk) VALUES (?,?,?,?)
		ON CONFLICT(tenant) DO UPDATE SET max_sandboxes = excluded.max_sandboxes, max_memory = excluded.max_memory, max_disk = excluded.max_disk`,
		tenant, q.MaxSandboxes, q.MaxMemory, q.MaxDisk)
	if err != nil {
		return fmt.Errorf("set quota of %q: %w", tenant, err)
	}
	return nil
}

// GetQuota returns tenant's stored quota (zero if none).
func (s *Store) GetQuota(ctx context.Context, tenant string) (Quota, error) {
	var q Quota
	err := s.getQuota.QueryRowContext(ctx, tenant).Scan(&q.MaxSandboxes, &q.MaxMemory, &q.MaxDisk)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return q, fmt.Errorf("get quota of %q: %w", tenant, err)
	}
	return q, nil
}

// Events.

// StoredEvent is an audit event with its sequence number.
type StoredEvent struct {
	Seq int64 `json:"seq"`
	audit.Event
}

// AddEvents appends events in one transaction.
func (s *Store) AddEvents(ctx context.Context, evs []audit.Event) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store events: %w", err)
	}
	defer tx.Rollback()
	st := tx.StmtContext(ctx, s.insertEvent)
	defer st.Close()
	for _, e := range evs {
		fields := ""
		if len(e.Fields) > 0 {
			b, err := json.Marshal(e.Fields)
			if err != nil {
				b, _ = json.Marshal(map[string]string{"unencodable": err.Error()})
			}
			fields = string(b)
		}
		if _, err := st.ExecContext(ctx, e.Sandbox, unixOrZero(e.Time), e.Type, e.Message, fields); err != nil {
			return fmt.Errorf("store events: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store events: %w", err)
	}
	return nil
}

// Events returns up to limit events of sandbox id with seq > after.
func (s *Store) Events(ctx context.Context, id string, after int64, limit int) ([]StoredEvent, error) {
	if limit <= 0 || limit > 10000 {
		limit = 10000
	}
	rows, err := s.db.QueryContext(ctx, `SELECT seq, sandbox, time, type, message, fields FROM events
		WHERE sandbox = ? AND seq > ? ORDER BY seq LIMIT ?`, id, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list events of %q: %w", id, err)
	}
	defer rows.Close()
	var out []StoredEvent
	for rows.Next() {
		var e StoredEvent
		var t int64
		var fields string
		if err := rows.Scan(&e.Seq, &e.Sandbox, &t, &e.Type, &e.Message, &fields); err != nil {
			return nil, err
		}
		e.Time = timeOrZero(t)
		if fields != "" {
			if err := json.Unmarshal([]byte(fields), &e.Fields); err != nil {
				return nil, fmt.Errorf("list events of %q: event %d: decode fields: %w", id, e.Seq, err)
			}
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func validTenant(t string) bool {
	if t == "" || len(t) > 64 {
		return false
	}
	for _, c := range t {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// Prune deletes sandboxes that stopped before cutoff, with their events,
// and returns how many sandboxes went.
func (s *Store) Prune(ctx context.Context, cutoff time.Time) (int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("prune store: %w", err)
	}
	defer tx.Rollback()
	c := cutoff.UnixNano()
	if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE sandbox IN
		(SELECT id FROM sandboxes WHERE state = ? AND ended_at > 0 AND ended_at < ?)`, StateStopped, c); err != nil {
		return 0, fmt.Errorf("prune store: %w", err)
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM sandboxes WHERE state = ? AND ended_at > 0 AND ended_at < ?`, StateStopped, c)
	if err != nil {
		return 0, fmt.Errorf("prune store: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, tx.Commit()
}
