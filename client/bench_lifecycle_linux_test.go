package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

// fill100MB makes a 100 MiB workspace: 25 files of 4 MiB of random bytes
// in a few directories.
const fill100MB = `set -e; cd /workspace; for d in a b c d e; do mkdir $d; for f in 1 2 3 4 5; do head -c 4194304 /dev/urandom > $d/$f.bin; done; done`

func benchSandbox(b *testing.B, c *client.Client) string {
	b.Helper()
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Policy: json.RawMessage(`{"limits": {"disk": "1Gi"}}`), KeepAlive: true})
	if err != nil {
		b.Fatal(err)
	}
	if r, err := c.Run(ctx, sb.ID, "sh", "-c", fill100MB); err != nil || r.Code != 0 {
		b.Fatal(err, r)
	}
	return sb.ID
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkPauseResume100MB: pause and resume of a sandbox with a 100 MiB
// workspace (each hashes the workspace: the pause records its manifest,
// the resume checks it), beside the peer: what keeping the files costs
// without pause (download the workspace as tar, destroy, create, upload).
func BenchmarkPauseResume100MB(b *testing.B) {
	c := requireNative(b).client(b)
	ctx := context.Background()
	id := benchSandbox(b, c)
	defer c.Delete(ctx, id)
	var pause, resume time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := c.Pause(ctx, id); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if sb, err := c.Resume(ctx, id); err != nil || !sb.Verified {
			b.Fatal(err, sb)
		}
		pause, resume = pause+t1.Sub(t0), resume+time.Since(t1)
	}
	b.StopTimer()
	t0 := time.Now()
	var tarball bytes.Buffer
	rc, err := c.Download(ctx, id, "/workspace")
	if err == nil {
		_, err = io.Copy(&tarball, rc)
		rc.Close()
	}
	if err != nil {
		b.Fatal(err)
	}
	peerSB, err := c.Create(ctx, api.CreateSandboxRequest{Policy: json.RawMessage(`{"limits": {"disk": "1Gi"}}`)})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Delete(ctx, peerSB.ID)
	if err := c.Upload(ctx, peerSB.ID, "/workspace", &tarball); err != nil {
		b.Fatal(err)
	}
	peer := time.Since(t0)
	n := time.Duration(b.N)
	b.ReportMetric(ms(pause/n), "pause-ms")
	b.ReportMetric(ms(resume/n), "resume-ms")
	b.ReportMetric(ms(peer), "peer-tar-recreate-ms")
	b.ReportMetric(float64(pause/n+resume/n)/float64(peer), "ratio-to-peer")
}

// BenchmarkCheckpointRollback100MB: a checkpoint after 4 MiB of the 100
// MiB workspace changed, and a rollback after rm -rf of it, beside the
// peer: a full copy of the workspace (cp -a, what a checkpoint that is not
// content-addressed costs every time).
func BenchmarkCheckpointRollback100MB(b *testing.B) {
	c := requireNative(b).client(b)
	ctx := context.Background()
	id := benchSandbox(b, c)
	defer c.Delete(ctx, id)
	if _, err := c.Checkpoint(ctx, id, "base"); err != nil {
		b.Fatal(err)
	}
	run := func(script string) time.Duration {
		t0 := time.Now()
		if r, err := c.Run(ctx, id, "sh", "-c", script); err != nil || r.Code != 0 {
			b.Fatal(err, r)
		}
		return time.Since(t0)
	}
	var cpT, rbT time.Duration
	var newBytes int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		run("head -c 4194304 /dev/urandom > /workspace/a/1.bin")
		b.StartTimer()
		t0 := time.Now()
		cp, err := c.Checkpoint(ctx, id, "")
		if err != nil {
			b.Fatal(err)
		}
		cpT += time.Since(t0)
		newBytes += cp.NewBytes
		b.StopTimer()
		run("rm -rf /workspace/*")
		c.DeleteCheckpoint(ctx, id, "") // no-op: keep the tenant under its quota below
		b.StartTimer()
		t0 = time.Now()
		if _, err := c.Rollback(ctx, id, cp.ID); err != nil {
			b.Fatal(err)
		}
		rbT += time.Since(t0)
		b.StopTimer()
		c.DeleteCheckpoint(ctx, id, cp.ID)
		b.StartTimer()
	}
	b.StopTimer()
	peer := run("rm -rf /tmp/copy; cp -a /workspace /tmp/copy") - run("true")
	n := time.Duration(b.N)
	b.ReportMetric(ms(cpT/n), "checkpoint-ms")
	b.ReportMetric(ms(rbT/n), "rollback-ms")
	b.ReportMetric(float64(newBytes)/float64(b.N)/(1<<20), "stored-MiB/checkpoint")
	b.ReportMetric(ms(peer), "peer-cp-a-ms")
	b.ReportMetric(float64(cpT/n)/float64(peer), "checkpoint-ratio-to-peer")
}
