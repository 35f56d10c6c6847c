package microvm

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestFirecrackerClientFraming sends the boot requests to a stand-in API
// server on a unix socket (Firecracker cannot run here): each arrives as
// the API expects it (method, path, JSON body that validates), and an
// error answer's fault_message reaches the caller, cleaned.
func TestFirecrackerClientFraming(t *testing.T) {
	d := loadAPI(t)
	sock := filepath.Join(t.TempDir(), "api.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []fcRequest
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var v map[string]any
		if r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &v) != nil {
			w.WriteHeader(400)
			return
		}
		mu.Lock()
		got = append(got, fcRequest{Method: r.Method, Path: r.URL.Path, Body: v})
		mu.Unlock()
		if r.URL.Path == "/actions" && v["action_type"] == "SendCtrlAltDel" {
			w.WriteHeader(400)
			w.Write([]byte(`{"fault_message":"bad\naction"}`))
			return
		}
		w.WriteHeader(204)
	})}
	go srv.Serve(l)
	defer srv.Close()
	m := &Machine{ID: "x", Dir: "/run/vm/x", Kernel: "/k/vmlinux", Initrd: "/k/initrd", Cmdline: "console=ttyS0 -- __vminit", VCPUs: 1, MemoryMiB: 256}
	reqs, err := fcBootRequests(m)
	if err != nil {
		t.Fatal(err)
	}
	c := newFCClient(sock)
	for _, r := range reqs {
		if err := c.do(context.Background(), r, nil); err != nil {
			t.Fatalf("%s: %v", r, err)
		}
	}
	if len(got) != len(reqs) {
		t.Fatalf("server got %d requests, sent %d", len(got), len(reqs))
	}
	d.validate(t, got)
	err = c.do(context.Background(), fcRequest{"PUT", "/actions", fcAction{ActionType: "SendCtrlAltDel"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "bad?action") {
		t.Fatalf("error answer: %v", err)
	}
}
