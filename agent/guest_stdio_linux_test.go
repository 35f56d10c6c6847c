package agent

import (
	"os"
	"testing"
	"time"
)

// TestDrainAfterExpiredDeadline: output already in the pipe is forwarded
// even when the drain deadline expired before the reader looked.
func TestDrainAfterExpiredDeadline(t *testing.T) {
	r, w, err := pipe(true)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	buf := make([]byte, 16)
	if n := readNow(r, buf); n != -1 {
		t.Fatalf("empty pipe: %d", n)
	}
	w.Write([]byte("abc"))
	r.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := r.Read(buf); !os.IsTimeout(err) {
		t.Fatalf("read past the deadline: %v", err)
	}
	if n := readNow(r, buf); n != 3 || string(buf[:3]) != "abc" {
		t.Fatalf("readNow: %d %q", n, buf[:max(n, 0)])
	}
	w.Close()
	if n := readNow(r, buf); n != 0 {
		t.Fatalf("at EOF: %d", n)
	}
}
