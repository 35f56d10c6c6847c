package client_test

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
)

// serverHolds reports whether the serve process pid has a file open whose
// name holds part (an unlinked spool shows as "... (deleted)").
func serverHolds(pid int, part string) bool {
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && strings.Contains(target, part) {
			return true
		}
	}
	return false
}

// TestE2EPauseResumeWhileUploadSpools: an archive upload whose body
// trickles in keeps a spool open on the sandbox's disk volume, in the
// server itself. A pause, then a resume at once, must both succeed with
// the files kept; the upload, which ran on the paused sandbox, ends with
// an error, not a success. A resume once failed under load with "volume
// ...: still mounted by a process that has not let go after 30s": the
// pause's unmount was refused by the server's own open file, became a
// lazy detach, and the image stayed held for as long as the client took
// (issue 24 item 14).
func TestE2EPauseResumeWhileUploadSpools(t *testing.T) {
	s := requireNative(t)
	c := s.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*hangGuard)
	defer cancel()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Policy: diskPolicy})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Delete(context.Background(), sb.ID)
	runOut(t, c, sb.ID, "echo kept > /workspace/keep.txt")

	pr, pw := io.Pipe()
	stop := make(chan struct{})
	trickled := make(chan struct{})
	go func() {
		// A tar header for a 1 MiB file, then its bytes a little at a
		// time, each well within the server's wait for body bytes.
		defer close(trickled)
		tw := tar.NewWriter(pw)
		if err := tw.WriteHeader(&tar.Header{Name: "big", Mode: 0o644, Size: 1 << 20, Typeflag: tar.TypeReg}); err != nil {
			return
		}
		tw.Flush()
		chunk := make([]byte, 512)
		for {
			select {
			case <-stop:
				pw.CloseWithError(io.ErrUnexpectedEOF)
				return
			case <-time.After(100 * time.Millisecond): // the trickle's pace, not a wait for a result
			}
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
	}()
	upErr := make(chan error, 1)
	go func() { upErr <- c.Upload(ctx, sb.ID, "/workspace/up", pr) }()
	defer func() {
		close(stop)
		<-trickled
	}()

	for deadline := time.Now().Add(hangGuard); !serverHolds(s.cmd.Process.Pid, ".upload-"); {
		if time.Now().After(deadline) {
			t.Fatal("the server opened no upload spool within the hang guard")
		}
		time.Sleep(20 * time.Millisecond) // polling for the spool (the readiness signal)
	}

	if _, err := c.Pause(ctx, sb.ID); err != nil {
		t.Fatalf("pause while an upload spools: %v", err)
	}
	if _, err := c.Resume(ctx, sb.ID); err != nil {
		t.Fatalf("resume at once after the pause: %v", err)
	}
	if got := runOut(t, c, sb.ID, "cat /workspace/keep.txt"); got != "kept\n" {
		t.Fatalf("after pause and resume: keep.txt holds %q", got)
	}
	select {
	case err := <-upErr:
		if err == nil || !clearRefusal(err) {
			t.Fatalf("the upload running on the paused sandbox: %v, want a clear refusal (409)", err)
		}
		t.Logf("the upload ended with: %v", err)
	case <-time.After(hangGuard):
		t.Fatal("the upload running on the paused sandbox did not end within the hang guard")
	}
	if serverHolds(s.cmd.Process.Pid, ".upload-") {
		t.Error("the server still holds the upload's spool")
	}
}
