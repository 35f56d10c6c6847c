package native

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

// TestHostIDRange: with a host id source, a root caller's sandbox is uid 0
// inside but a leased unprivileged host uid: root-only host files outside
// the deny list stay unreadable (first shown readable by root on the
// host), files it writes are the range's, and the lease is free again
// after Destroy.
func TestHostIDRange(t *testing.T) {
	b := testBackend(t)
	lockDir := t.TempDir()
	ids, err := idmap.Default(lockDir)
	if err != nil {
		t.Fatal(err)
	}
	b.cfg.HostIDs = ids
	secret := filepath.Join(t.TempDir(), "debian.cnf")
	os.Chmod(filepath.Dir(secret), 0o755)
	os.Chmod(filepath.Dir(filepath.Dir(secret)), 0o755)
	if err := os.WriteFile(secret, []byte("password = hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(secret); err != nil || !strings.Contains(string(b), "hunter2") {
		t.Fatalf("root cannot read the bait on the host: %v", err)
	}
	ws := workspace(t)
	os.Chmod(filepath.Dir(ws), 0o755)
	os.Chmod(filepath.Dir(filepath.Dir(ws)), 0o755)
	pol := testPolicy(t, ws, func(p *policy.Policy) {
		p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, filepath.Dir(secret))
	})
	ctx := context.Background()
	sb, err := b.Create(ctx, sandbox.Spec{ID: newID(t), Policy: pol, OwnWorkspace: true})
	if err != nil {
		t.Fatal(err)
	}
	hostUID, hostGID := sb.(sandbox.HostIdentity).HostIDs()
	if hostUID < idmap.DefaultBase || hostGID < idmap.DefaultBase {
		t.Fatalf("host ids %d/%d, want a leased range", hostUID, hostGID)
	}
	_, out := sh(t, sb, "id -u; cat /proc/self/uid_map; cat "+secret+"; echo x > "+filepath.Join(ws, "made"))
	if strings.Contains(out, "hunter2") {
		t.Fatalf("the sandbox read a root-only host file: %q", out)
	}
	f := strings.Fields(out)
	if len(f) < 4 || f[0] != "0" || f[1] != "0" || f[2] != strconv.Itoa(hostUID) || f[3] != "65536" || !strings.Contains(out, "Permission denied") {
		t.Fatalf("uid inside / uid_map: %q ", out)
	}
	var host syscall.Stat_t
	if err := syscall.Stat(filepath.Join(ws, "made"), &host); err != nil || int(host.Uid) != hostUID || int(host.Gid) != hostGID {
		t.Fatalf("host owner of a file made inside: %d:%d %v, want %d:%d", host.Uid, host.Gid, err, hostUID, hostGID)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	// Its range is free again: nobody holds its lock file.
	lock, err := os.OpenFile(filepath.Join(lockDir, strconv.Itoa(hostUID)+"-"+strconv.Itoa(hostGID)+".lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("the destroyed sandbox's range is still leased: %v", err)
	}
}
