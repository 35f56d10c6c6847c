package docker

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock-dev/airlock/backend/internal/idmap"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// TestHostIDRange: with a host id source (a root server), the container
// runs as a leased unprivileged host uid, never host root: a root-only
// host file bound in stays unreadable (first shown readable by root on the
// host), what it writes in its workspace is the range's, and the lease is
// free again after Destroy.
func TestHostIDRange(t *testing.T) {
	b := testBackend(t)
	lockDir := t.TempDir()
	ids, err := idmap.Default(lockDir)
	if err != nil {
		t.Fatal(err)
	}
	b.cfg.HostIDs = ids
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755)
	secret := filepath.Join(dir, "debian.cnf")
	if err := os.WriteFile(secret, []byte("password = hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(secret); err != nil || !strings.Contains(string(b), "hunter2") {
		t.Fatalf("root cannot read the bait on the host: %v", err)
	}
	ws := workspace(t)
	os.Chmod(filepath.Dir(ws), 0o755) // the range's uid must reach it
	os.Chmod(filepath.Dir(filepath.Dir(ws)), 0o755)
	pol := testPolicy(t, ws, func(p *policy.Policy) {
		p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, dir)
	})
	ctx := context.Background()
	sb, err := b.Create(ctx, sandbox.Spec{ID: newID(t), Policy: pol, OwnWorkspace: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	hostUID, hostGID := sb.(sandbox.HostIdentity).HostIDs()
	if hostUID < idmap.DefaultBase || hostGID < idmap.DefaultBase {
		t.Fatalf("host ids %d/%d, want a leased range", hostUID, hostGID)
	}
	_, out := sh(t, sb, "id -u; cat "+secret+" 2>&1; echo x > "+filepath.Join(ws, "made"))
	if strings.Contains(out, "hunter2") {
		t.Fatalf("the container read a root-only host file: %q", out)
	}
	if f := strings.Fields(out); len(f) < 1 || f[0] != strconv.Itoa(hostUID) || !strings.Contains(out, "Permission denied") {
		t.Fatalf("uid inside: %q, want %d and a refused read", out, hostUID)
	}
	// The workspace is overlaid (protect_config): its changes come back
	// on Sync, made by the host as the sandbox's ids.
	if _, err := sb.(sandbox.Syncer).Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(ws, "made"), &st); err != nil || int(st.Uid) != hostUID || int(st.Gid) != hostGID {
		t.Fatalf("host owner of a file made inside: %d:%d %v, want %d:%d", st.Uid, st.Gid, err, hostUID, hostGID)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(lockDir, strconv.Itoa(hostUID)+"-"+strconv.Itoa(hostGID)+".lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("the destroyed sandbox's range is still leased: %v", err)
	}
}
