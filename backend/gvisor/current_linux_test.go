package gvisor

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/sandbox"
)

// pinnedRunsc is the runsc version scripts/runsc.sh builds.
func pinnedRunsc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../scripts/runsc.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^version=v(\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("scripts/runsc.sh pins no version=v...")
	}
	return string(m[1])
}

// The runsc the tests (and CI) run is the one make deps pins, on the
// platform the backend picks for this host (systrap here: no KVM), and a
// sandbox says so. Elsewhere (Debian's runsc, say) the other tests still
// run; under CI a runsc other than the pinned one fails here.
func TestCurrentRunsc(t *testing.T) {
	b := testBackend(t)
	info := b.Info(t.Context())
	if info.Err != nil {
		t.Fatal(info.Err)
	}
	want := pinnedRunsc(t)
	if !strings.Contains(info.Version, want) {
		testutil.Skip(t, "runsc on PATH is "+info.Path+" ("+info.Version+"), not the pinned "+want+": make deps builds it (scripts/runsc.sh)")
	}
	if info.Platform != PlatformSystrap && info.Platform != PlatformKVM {
		t.Errorf("platform %q, want systrap or kvm (runsc %s has %v)", info.Platform, info.Version, info.Platforms)
	}
	sb := create(t, b, sandbox.Spec{Policy: testPolicy(t, workspace(t), direct)})
	rt := sb.(sandbox.RuntimeReporter).Runtime()
	if rt["platform"] != info.Platform || rt["runsc_version"] != want {
		t.Errorf("sandbox runtime %v, want platform %s and runsc %s", rt, info.Platform, want)
	}
	// gVisor's kernel answers inside, not the host's.
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	if _, out := sh(t, sb, "uname -r"); out == "" || out == unix.ByteSliceToString(u.Release[:]) {
		t.Errorf("uname -r inside: %q, the host's", out)
	}
}
