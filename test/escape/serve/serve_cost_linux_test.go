package serve

// Issue 24, findings 1–7: what a keyed tenant can make the server hold
// (paused sandboxes, checkpoint scans, locks, upload spools, output) is
// charged to that tenant and bounded. The attacks run in TestServeAttacks
// (costAttacks), against the same real `airlock serve`.

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

// pausedRetention is the harness server's --paused-retention: short, so
// that the test sees a paused sandbox expire.
const pausedRetention = "20s"

// uploadTimeout is the harness server's --upload-timeout.
const uploadTimeout = "10s"

func costAttacks() []serveAttack {
	return []serveAttack{
		{name: "sparse-checkpoint", item: "issue 24 #3–5", dos: true, goal: "burn a server core for hours with a checkpoint, pause and rollback of a 2 TiB sparse file", run: attackSparseCheckpoint},
		{name: "upload-spool", item: "issue 24 #2", dos: true, goal: "fill the data disk with a gzip bomb's spool, trickled to stay open", run: attackUploadSpool},
		{name: "slow-readers", item: "issue 24 #7", dos: true, goal: "hold the server's memory with 48 buffered execs of 32 MiB output read slowly", run: attackSlowReaders},
		{name: "conn-flood", item: "issue 24 #8", dos: true, goal: "keep a keyed tenant out with slow request heads from 69 addresses of one /24, from 90 networks, and 200 keyed connections", run: attackConnFlood},
		{name: "paused-quota", item: "issue 24 #1", dos: true, goal: "keep more paused sandboxes than the tenant's quota, for ever, and starve the neighbour's creates", run: attackPausedQuota},
		{name: "disk-quota", item: "issue 24: disk", dos: true, goal: "hold more of the server's disk than the tenant's max_disk through sandboxes, snapshots, volumes, uploads and paused sandboxes", run: attackDiskQuota},
	}
}

// quota sets tenant's quota with the CLI (the operator's).
func (h *serveHarness) quota(tenant string, args ...string) {
	cmd := exec.Command(h.bin, append([]string{"serve", "quota", "set", "--tenant", tenant, "--data", h.data}, args...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		h.t.Fatalf("serve quota set --tenant %s %v: %v %s", tenant, args, err, b)
	}
}

// waitState polls sandbox id until its state is want and its reason
// names why, within deadline.
func waitState(t *testing.T, c *client.Client, id, want, why string, deadline time.Duration) *api.Sandbox {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		sb, err := c.Get(context.Background(), id)
		if err == nil && sb.State == want && strings.Contains(sb.Reason, why) {
			return sb
		}
		if time.Now().After(end) {
			t.Fatalf("sandbox %s: not %s (%q) within %s: %+v %v", id, want, why, deadline, sb, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func attackPausedQuota(h *serveHarness, t *testing.T, r *serveResult) {
	ctx := context.Background()
	h.quota("carol", "--max-sandboxes", "1", "--max-memory", "1Gi")
	carol := h.tenant("carol", "127.0.0.3")
	sb, err := carol.Create(ctx, api.CreateSandboxRequest{})
	must(t, err)
	defer carol.Delete(ctx, sb.ID)
	_, err = carol.Create(ctx, api.CreateSandboxRequest{})
	r.Proof = "while it runs, carol's second create is refused: " + wantRefused(t, "a second running sandbox", err, 429, "of 1 sandboxes")
	if _, err := carol.Run(ctx, sb.ID, "sh", "-c", "head -c 8M /dev/urandom > keep"); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.Pause(ctx, sb.ID); err != nil {
		t.Fatalf("pause: %v", err)
	}
	img := filepath.Join(h.data, "volumes", sb.ID+".img")
	if _, err := os.Stat(img); err != nil {
		t.Fatalf("the paused sandbox's volume: %v", err)
	}
	_, err = carol.Create(ctx, api.CreateSandboxRequest{})
	r.Evidence = "a create beside a paused sandbox: " + wantRefused(t, "a create beside the paused sandbox", err, 429, "paused")
	other, err := h.bob.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Errorf("bob's create while carol's sandbox is paused: %v", err)
	} else {
		h.bob.Delete(ctx, other.ID)
	}
	// The retention ends it, its files with it, and gives carol her quota back.
	gone := waitState(t, carol, sb.ID, "stopped", "paused retention", 90*time.Second)
	if _, err := os.Stat(img); !os.IsNotExist(err) {
		t.Errorf("the expired paused sandbox's volume %s is still there: %v", img, err)
	}
	again, err := carol.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Errorf("carol's create after her paused sandbox expired: %v", err)
	} else {
		carol.Delete(ctx, again.ID)
	}
	r.Evidence += fmt.Sprintf("; bob's create succeeds; after --paused-retention %s: %q, its volume removed, carol may create again", pausedRetention, gone.Reason)
	r.Verdict = "bounded"
}

func attackSparseCheckpoint(h *serveHarness, t *testing.T, r *serveResult) {
	ctx := context.Background()
	// Unconfined, reading the file as the checkpoint of main did reads
	// 2 TiB of zeros: at the speed measured here, hours.
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	must(t, exec.Command("truncate", "-s", "2T", big).Run())
	f, err := os.Open(big)
	must(t, err)
	buf := make([]byte, 1<<20)
	t0 := time.Now()
	var n int64
	for time.Since(t0) < time.Second {
		m, _ := f.Read(buf)
		n += int64(m)
	}
	f.Close()
	r.Proof = fmt.Sprintf("reading the 2 TiB file whole: %d MiB/s, %.1f h", n>>20, float64(2<<40)/float64(n)/3600)

	sb, err := h.alice.Create(ctx, api.CreateSandboxRequest{})
	must(t, err)
	defer h.alice.Delete(ctx, sb.ID)
	res, err := h.alice.Run(ctx, sb.ID, "sh", "-c", "truncate -s 2T big && printf data | dd of=big bs=1 seek=1099511627776 conv=notrunc 2>/dev/null && head -c 1M /dev/urandom > small && du -k big")
	if err != nil || res.Code != 0 {
		t.Fatalf("make the sparse file: %v %+v", err, res)
	}
	t0 = time.Now()
	cp, err := h.alice.Checkpoint(ctx, sb.ID, "sparse")
	took := time.Since(t0)
	if err != nil {
		t.Fatalf("checkpoint of a workspace with a 2 TiB sparse file: %v", err)
	}
	if cp.NewBytes > 2<<20 {
		t.Errorf("the checkpoint stored %d bytes for 1 MiB and 4 bytes of data", cp.NewBytes)
	}
	// The sandbox lives on, and its files change; the rollback brings
	// them back, the big file still sparse.
	if _, err := h.alice.Run(ctx, sb.ID, "sh", "-c", "rm big small"); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	if _, err := h.alice.Rollback(ctx, sb.ID, cp.ID); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	rolled := time.Since(t1)
	res, err = h.alice.Run(ctx, sb.ID, "sh", "-c", "stat -c %s big; du -k big | cut -f1; dd if=big bs=1 skip=1099511627776 count=4 2>/dev/null; echo")
	if err != nil || !strings.HasPrefix(string(res.Stdout), "2199023255552\n") || !strings.Contains(string(res.Stdout), "data") {
		t.Fatalf("after the rollback: %v %q", err, res.Stdout)
	}
	if kb, _ := strconv.Atoi(strings.Split(string(res.Stdout), "\n")[1]); kb > 1024 {
		t.Errorf("the restored 2 TiB file takes %d KiB: not sparse", kb)
	}
	// Pause and resume hash it too (the resume checks the pause's manifest).
	t2 := time.Now()
	if _, err := h.alice.Pause(ctx, sb.ID); err != nil {
		t.Fatalf("pause: %v", err)
	}
	if _, err := h.alice.Resume(ctx, sb.ID); err != nil {
		t.Fatalf("resume: %v", err)
	}
	r.Evidence = fmt.Sprintf("checkpoint in %s (stored %d bytes, recorded %d data bytes), rollback in %s (still sparse), pause and resume in %s",
		took.Round(time.Millisecond), cp.NewBytes, cp.Bytes, rolled.Round(time.Millisecond), time.Since(t2).Round(time.Millisecond))
	r.Verdict = "bounded"
}

// gzipZeros is a gzip stream of n zero bytes (about n/1000 bytes).
func gzipZeros(t *testing.T, n int) []byte {
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	must(t, err)
	zero := make([]byte, 1<<20)
	for i := 0; i < n>>20; i++ {
		zw.Write(zero)
	}
	must(t, zw.Close())
	return b.Bytes()
}

// stalledUpload uploads body through c, then holds the request open
// (the client trickling nothing more) until the server answers or for
// at most hold; it returns the server's answer.
func stalledUpload(c *client.Client, id string, body []byte, hold time.Duration, each func()) error {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		pw.Write(body)
		t := time.NewTimer(hold)
		defer t.Stop()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				pw.CloseWithError(errors.New("client gave up"))
				return
			case <-t.C:
				pw.CloseWithError(errors.New("client gave up"))
				return
			case <-tick.C:
				if each != nil {
					each()
				}
			}
		}
	}()
	err := c.Upload(context.Background(), id, "/tmp/u", pr)
	close(done)
	return err
}

func attackUploadSpool(h *serveHarness, t *testing.T, r *serveResult) {
	ctx := context.Background()
	bomb := gzipZeros(t, 400<<20)
	body := bomb[:len(bomb)-64] // the stream's end never comes
	r.Proof = fmt.Sprintf("a %d-byte gzip body that inflates to 400 MiB, held open after its last byte", len(body))
	sb, err := h.alice.Create(ctx, api.CreateSandboxRequest{})
	must(t, err)
	defer h.alice.Delete(ctx, sb.ID)
	before := freeOf(h.dir)
	var worst int64
	err = stalledUpload(h.alice, sb.ID, body, 60*time.Second, func() { worst = max(worst, before-freeOf(h.dir)) })
	r.Evidence = "the spool on the sandbox's own volume: " + wantRefused(t, "a gzip bomb's spool", err, 507, "limits.disk")
	if worst > 80<<20 {
		t.Errorf("the spool took %d MiB of the data disk (the sandbox's disk is 64 MiB)", worst>>20)
	}
	if _, err := h.alice.Run(ctx, sb.ID, "sh", "-c", "head -c 1M /dev/urandom > after"); err != nil {
		t.Errorf("the sandbox after its refused upload: %v", err)
	}
	// A trickle within the per-read timeout is cut at the total deadline.
	small := gzipZeros(t, 1<<20)
	pr, pw := io.Pipe()
	go func() {
		for i := 0; i < 90 && i < len(small); i++ {
			if _, err := pw.Write(small[i : i+1]); err != nil {
				return
			}
			time.Sleep(time.Second)
		}
		pw.CloseWithError(errors.New("client gave up"))
	}()
	t0 := time.Now()
	err = h.alice.Upload(ctx, sb.ID, "/tmp/t", pr)
	pr.Close()
	r.Evidence += fmt.Sprintf("; a body trickled one byte a second: %s after %s (--upload-timeout %s)",
		wantRefused(t, "a trickled upload", err, 504, "not received within"), time.Since(t0).Round(time.Second), uploadTimeout)
	r.Verdict = "bounded"
}

// slowReaders starts n buffered execs in sandbox id, each writing 16 MiB
// to stdout and to stderr, and reads their answers at 256 KiB/s for
// hold; it returns the server's peak RSS (kB) meanwhile.
func slowReaders(h *serveHarness, t *testing.T, id string, n int, hold time.Duration) int {
	body := `{"args":["sh","-c","head -c 16777216 /dev/zero; head -c 16777216 /dev/zero >&2"],"encoding":"base64"}`
	key := h.keys["alice"][1]
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", "http://"+h.addr+"/v1/sandboxes/"+id+"/exec", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("slow reader: %v", err)
				return
			}
			defer resp.Body.Close()
			buf := make([]byte, 64<<10)
			for {
				select {
				case <-stop:
					return
				case <-time.After(250 * time.Millisecond):
				}
				if _, err := resp.Body.Read(buf); err != nil {
					return
				}
			}
		}()
	}
	peak := 0
	for end := time.Now().Add(hold); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		peak = max(peak, h.rssKB())
	}
	close(stop)
	wg.Wait()
	return peak
}

func attackSlowReaders(h *serveHarness, t *testing.T, r *serveResult) {
	ctx := context.Background()
	sb, err := h.alice.Create(ctx, api.CreateSandboxRequest{Policy: []byte(`{"limits":{"disk":"256Mi","output_bytes":"64Mi"}}`)})
	must(t, err)
	defer h.alice.Delete(ctx, sb.ID)
	// One answer of 16 MiB each side comes back whole, encoded as it is sent.
	res, err := h.alice.RunRequest(ctx, sb.ID, api.ExecRequest{Args: []string{"sh", "-c", "head -c 16777216 /dev/urandom > o; cat o; sha256sum o >&2; rm o"}})
	if err != nil || len(res.Stdout) != 16<<20 || res.Truncated {
		t.Fatalf("a 16 MiB output: %v (%d bytes, truncated %v)", err, len(res.Stdout), res != nil && res.Truncated)
	}
	if sum := sha256.Sum256(res.Stdout); !strings.HasPrefix(string(res.Stderr), hex.EncodeToString(sum[:])) {
		t.Fatalf("a 16 MiB output came back changed: sha256 %x, in the sandbox %s", sum, res.Stderr)
	}
	before := h.rssKB()
	peak := slowReaders(h, t, sb.ID, 48, 15*time.Second)
	r.Proof = "48 buffered execs of 2x16 MiB, answers read at 256 KiB/s (issue 24: 54 MB -> 4.65 GB RSS on main b4a1275)"
	r.Evidence = fmt.Sprintf("server RSS %d MB before, peak %d MB with 48 slow readers (target < 300 MB); beyond 64 KiB per stream the output spills to the sandbox's volume, past its limits.disk it is dropped (output_truncated)", before>>10, peak>>10)
	if peak > 300<<10 {
		t.Errorf("server RSS peaked at %d MB with 48 slow readers", peak>>10)
	}
	r.Verdict = "bounded"
}
