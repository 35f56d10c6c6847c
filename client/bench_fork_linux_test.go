package client_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

// BenchmarkFork1GiB: fork of a sandbox whose workspace holds 1 GiB of
// random data, beside a cold create of the same sandbox, on a server of
// its own: with disk volumes (every sandbox its own ext4 image, so a
// fork copies across filesystems) and without (--disk-quota none: the
// workspaces share the data directory's filesystem, where a reflink can
// apply). It reports the fork's time, the bytes the data directory's
// filesystem lost to it, and the copy method the server used (as
// reflink-files/op and copied-files/op, both per fork).
//
//	go test -run '^$' -bench Fork1GiB -benchtime 5x ./client
func BenchmarkFork1GiB(b *testing.B) {
	requireNative(b)
	for _, mode := range []string{"volume", "none"} {
		b.Run("disk-quota="+mode, func(b *testing.B) { benchFork(b, mode) })
	}
}

func benchFork(b *testing.B, mode string) {
	dir, err := os.MkdirTemp("/var/tmp", "airlock-forkbench-") // not a tmpfs
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o711); err != nil { // sandboxes' host ids reach their workspaces below
		b.Fatal(err)
	}
	s, err := startServe(dir, "--backend", "native", "--disk-quota", mode)
	if err != nil {
		b.Fatal(err)
	}
	defer s.stop()
	c := s.client(b)
	ctx := context.Background()
	req := api.CreateSandboxRequest{Policy: json.RawMessage(`{"limits": {"disk": "3Gi"}}`)}
	if mode == "none" {
		req.Policy = nil
	}
	t0 := time.Now()
	sb, err := c.Create(ctx, req)
	if err != nil {
		b.Fatal(err)
	}
	cold := time.Since(t0)
	defer c.Delete(ctx, sb.ID)
	if r, err := c.Run(ctx, sb.ID, "sh", "-c", "head -c 1073741824 /dev/urandom > /workspace/data && sync"); err != nil || r.Code != 0 {
		b.Fatalf("fill: %v %+v", err, r)
	}
	var forkTime time.Duration
	var used int64
	var last api.CopyReport
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		before := usedBytes(b, s.data)
		t0 := time.Now()
		res, err := c.Fork(ctx, sb.ID, api.ForkRequest{})
		forkTime += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		syncData(c, res.Sandboxes[0].ID)
		used += usedBytes(b, s.data) - before
		last = res.Copy
		if err := c.Delete(ctx, res.Sandboxes[0].ID); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	if last.Bytes < 1<<30 {
		b.Fatalf("fork copied %d bytes", last.Bytes)
	}
	b.ReportMetric(float64(forkTime.Milliseconds())/float64(b.N), "fork-ms")
	b.ReportMetric(float64(cold.Milliseconds()), "cold-create-ms")
	b.ReportMetric(float64(used)/float64(b.N), "disk-B/op")
	b.ReportMetric(float64(last.Bytes), "workspace-B")
	reflink := 0.0
	if last.Method == api.CopyReflink {
		reflink = 1
	}
	b.ReportMetric(reflink, "reflink")
	var st unix.Statfs_t
	unix.Statfs(s.data, &st)
	b.Logf("disk-quota=%s: data dir filesystem type 0x%x; copy method %q, %d files, %d bytes, %d ms (server's count)", mode, st.Type, last.Method, last.Files, last.Bytes, last.Millis)
}

// syncData flushes the fork's files so the blocks they take are counted.
func syncData(c *client.Client, id string) {
	c.Run(context.Background(), id, "sync")
}

// usedBytes is how much of dir's filesystem is in use.
func usedBytes(b *testing.B, dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Clean(dir), &st); err != nil {
		b.Fatal(err)
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize
}
