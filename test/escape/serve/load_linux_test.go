package serve

// The server load test (issue 11): against a real `airlock serve` over
// loopback, 200 execs at once from four keyed tenants, then N sandboxes
// created and destroyed (8 at a time), and afterwards nothing may be left
// of them: processes, cgroups, mounts, loop devices, files, descriptors.
// CI runs N=100; `make load` runs N=1000 (AIRLOCK_LOAD_SANDBOXES). Figures
// are logged, never asserted.

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/internal/volume"
)

// hostCounts are what a leak would show in.
type hostCounts struct {
	inits, cgroups, mounts, loops, files, fds int
}

func (h *serveHarness) counts(t *testing.T) hostCounts {
	var c hostCounts
	// Only this server's: other airlock processes may run on the host.
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i > 0 {
			cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
			if f := strings.Fields(s[i+1:]); len(f) > 2 && f[1] == strconv.Itoa(h.serverPid()) && strings.HasPrefix(string(cmdline), "airlock-init") {
				c.inits++
			}
		}
	}
	// The server's own cgroup parent: every sandbox cgroup is below it.
	sum := sha256.Sum256([]byte(h.data))
	parent := fmt.Sprintf("airlock-serve-%x", sum[:4])
	filepath.Walk("/sys/fs/cgroup", func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.IsDir() && strings.HasPrefix(fi.Name(), "sb-") && strings.Contains(p, parent) {
			c.cgroups++
			return filepath.SkipDir
		}
		return nil
	})
	run := filepath.Join("/run/airlock", parent) // the server's runtime dir (mount points, backend state)
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 4 && (strings.HasPrefix(f[4], h.data+"/") || strings.HasPrefix(f[4], run+"/")) {
				c.mounts++
			}
		}
	}
	if ents, err := os.ReadDir("/sys/block"); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "loop") {
				if b, err := os.ReadFile(filepath.Join("/sys/block", e.Name(), "loop", "backing_file")); err == nil && strings.HasPrefix(string(b), h.data) {
					c.loops++
				}
			}
		}
	}
	for _, d := range []string{filepath.Join(h.data, "volumes"), filepath.Join(h.data, "workspaces"), filepath.Join(run, "volumes"), filepath.Join(run, "backends", "native")} {
		ents, _ := os.ReadDir(d)
		c.files += len(ents)
	}
	c.fds = h.fds()
	return c
}

func TestServeLoad(t *testing.T) {
	testutil.RequireLinux(t)
	testutil.RequireRoot(t)
	if why := volume.Available(); why != "" {
		testutil.Skip(t, "server load: "+why)
	}
	n := 100
	if v := os.Getenv("AIRLOCK_LOAD_SANDBOXES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			t.Fatalf("AIRLOCK_LOAD_SANDBOXES=%q", v)
		}
	}
	// One legitimate tenant driving 200 execs at once from one address:
	// the per-network and per-tenant connection limits the attack suite
	// runs with (64, 128) are off here, as for a server behind a proxy.
	h := startServe(t, "--max-conns-per-prefix", "0", "--max-conns-per-tenant", "0")
	ctx := context.Background()
	// Idle keep-alive connections of the clients are not the server's
	// leaks: they are closed before each count.
	closeIdle := func(cs ...*client.Client) {
		for _, c := range append(cs, h.alice, h.bob, h.local) {
			c.Close()
		}
		time.Sleep(100 * time.Millisecond)
	}
	closeIdle()
	base := h.counts(t) // bob's sandbox is live throughout

	// 200 execs at once: four tenants, 50 each, from their own addresses.
	var tenants []*client.Client
	var sbs []string
	for i := 0; i < 4; i++ {
		c := h.tenant(fmt.Sprintf("load%d", i), fmt.Sprintf("127.0.1.%d", i+1))
		sb, err := c.Create(ctx, api.CreateSandboxRequest{})
		must(t, err)
		tenants = append(tenants, c)
		sbs = append(sbs, sb.ID)
	}
	var mu sync.Mutex
	var lat []time.Duration
	var failed []string
	var wg sync.WaitGroup
	start := make(chan struct{})
	t0 := time.Now()
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			c, sb := tenants[i%4], sbs[i%4]
			s := time.Now()
			res, err := c.Run(ctx, sb, "sh", "-c", "echo $$")
			d := time.Since(s)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || res.Code != 0 {
				failed = append(failed, fmt.Sprint(err))
				return
			}
			lat = append(lat, d)
		}()
	}
	close(start)
	wg.Wait()
	wall := time.Since(t0)
	if len(failed) > 0 {
		t.Errorf("%d of 200 concurrent execs failed: %v", len(failed), failed[:min(3, len(failed))])
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		t.Logf("200 concurrent execs: wall %s, latency p50 %s p99 %s max %s", wall.Round(time.Millisecond),
			lat[len(lat)/2].Round(100*time.Microsecond), lat[min(len(lat)-1, len(lat)*99/100)].Round(100*time.Microsecond), lat[len(lat)-1].Round(100*time.Microsecond))
	}
	for i, c := range tenants {
		must(t, c.Delete(ctx, sbs[i]))
	}

	// N sandboxes created and destroyed, 8 at a time, each used once.
	sem := make(chan struct{}, 8)
	var created []time.Duration
	t0 = time.Now()
	var mid int
	for i := 0; i < n; i++ {
		if i == n/2 {
			// Half way: what the server holds now must not grow with
			// the second half (pools and caches reach their size early).
			wg.Wait()
			closeIdle(tenants...)
			mid = h.fds()
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c := tenants[i%4]
			s := time.Now()
			sb, err := c.Create(ctx, api.CreateSandboxRequest{})
			if err != nil {
				mu.Lock()
				failed = append(failed, "create: "+err.Error())
				mu.Unlock()
				return
			}
			d := time.Since(s)
			_, err = c.Run(ctx, sb.ID, "sh", "-c", "echo x > f; sleep 0.01 &")
			derr := c.Delete(ctx, sb.ID)
			mu.Lock()
			defer mu.Unlock()
			created = append(created, d)
			if err != nil || derr != nil {
				failed = append(failed, fmt.Sprintf("use/delete: %v %v", err, derr))
			}
		}()
	}
	wg.Wait()
	wall = time.Since(t0)
	if len(failed) > 0 {
		t.Errorf("%d failures among %d sandboxes: %v", len(failed), n, failed[:min(3, len(failed))])
	}
	sort.Slice(created, func(i, j int) bool { return created[i] < created[j] })
	if len(created) > 0 {
		t.Logf("%d sandboxes created, used and destroyed (8 at a time) in %s (%.1f/s); create p50 %s p99 %s",
			n, wall.Round(time.Millisecond), float64(n)/wall.Seconds(), created[len(created)/2].Round(100*time.Microsecond), created[min(len(created)-1, len(created)*99/100)].Round(100*time.Microsecond))
	}
	// Nothing left: compare with before (bob's sandbox only).
	var after hostCounts
	deadline := time.Now().Add(20 * time.Second)
	closeIdle(tenants...)
	for {
		after = h.counts(t)
		if after.inits <= base.inits && after.cgroups <= base.cgroups && after.mounts <= base.mounts &&
			after.loops <= base.loops && after.files <= base.files || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("host before %+v, after %+v", base, after)
	if after.inits > base.inits || after.cgroups > base.cgroups || after.mounts > base.mounts || after.loops > base.loops || after.files > base.files {
		t.Errorf("leak after %d sandboxes: before %+v, after %+v", n, base, after)
	}
	// The store's connections (at most 64, and the descriptors SQLite
	// keeps for them) are a bound reached early, not a growth with the
	// number of sandboxes.
	t.Logf("server descriptors: %d before, %d half way, %d after", base.fds, mid, after.fds)
	if after.fds > mid+8 || after.fds > base.fds+80 {
		t.Errorf("server descriptors %d -> %d (half way %d) after %d sandboxes: %v", base.fds, after.fds, mid, n, h.fdKinds())
	}
}

// fdKinds counts the server's descriptors by what they are.
func (h *serveHarness) fdKinds() map[string]int {
	out := map[string]int{}
	dir := fmt.Sprintf("/proc/%d/fd", h.serverPid())
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		l, _ := os.Readlink(filepath.Join(dir, e.Name()))
		if i := strings.IndexByte(l, ':'); i > 0 && !strings.HasPrefix(l, "/") {
			l = l[:i]
		}
		out[l]++
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// agentBinary is the airlock binary the server runs.
func agentBinary(t *testing.T) string { return testutil.AirlockBinary(t) }

func haveRunsc() bool { _, err := exec.LookPath("runsc"); return err == nil }

func copyFile(from, to string, mode os.FileMode) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, mode)
}
