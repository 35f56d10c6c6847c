package native

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/airlock-dev/airlock/backend/internal/idmap"
	"github.com/airlock-dev/airlock/sandbox"
)

// A normal user's sandbox with a host id range (Config.HostIDs without
// root: the caller's /etc/subuid and /etc/subgid entries, `airlock run
// --image`) cannot have its maps written by us: the kernel lets an
// unprivileged process map only its own id. The setuid newuidmap and
// newgidmap of shadow-utils write them, after checking the ranges are the
// caller's. The sandbox's user inside (p.uid, root for most images) is
// the caller itself, so what it writes in the workspace and other binds
// lands as the caller without an idmapped mount (which an unprivileged
// user cannot make on a host filesystem); every other id inside is one
// of the leased subordinate slot's. No other host id is in the maps, so
// no capability inside reaches anything else.

// envIDMap tells the init its maps are written by the host after it
// starts: it stays dumpable until the host's go-ahead (newuidmap checks
// the target process is the caller's, which a non-dumpable one is not).
const envIDMap = "AIRLOCK_INIT_IDMAP=1"

// subMap is the map of one id kind: inside 0..idmap.Size-1, the id
// inside standing for the caller (host id self), every other onto the
// range from base. As newuidmap's arguments (inside, host, count
// triples).
func subMap(inside, self, base int) []string {
	var args []string
	add := func(in, host, n int) {
		if n > 0 {
			args = append(args, strconv.Itoa(in), strconv.Itoa(host), strconv.Itoa(n))
		}
	}
	add(0, base, inside)
	add(inside, self, 1)
	add(inside+1, base+inside+1, idmap.Size-inside-1)
	return args
}

// writeSubIDMaps maps the init pid's user namespace through newuidmap
// and newgidmap (see subMap): the sandbox's uid/gid inside is the
// caller's, the rest the lease's.
func writeSubIDMaps(pid, uid, gid int, lease *idmap.Lease) error {
	newuid, newgid, err := idmap.Tools()
	if err != nil {
		return err
	}
	for _, m := range []struct {
		tool string
		args []string
	}{
		{newuid, subMap(uid, os.Getuid(), lease.UID)},
		{newgid, subMap(gid, os.Getgid(), lease.GID)},
	} {
		cmd := exec.Command(m.tool, append([]string{strconv.Itoa(pid)}, m.args...)...)
		cmd.Env = []string{}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s: %v: %s (it maps only for a caller running with its own uid and primary group from /etc/passwd, onto those and its /etc/subuid and /etc/subgid ranges): %w",
				m.tool, strings.Join(m.args, " "), err, strings.TrimSpace(string(out)), sandbox.ErrUnavailable)
		}
	}
	return nil
}
