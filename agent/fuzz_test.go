package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/airlock-dev/airlock/sandbox"
)

func FuzzHeader(f *testing.F) {
	f.Add(rawHeader(&request{Op: opExec, Exec: &execRequest{Args: []string{"/bin/true"}}}))
	f.Add(rawHeader(&response{Error: &wireError{Kind: "not_found", Msg: "x"}}))
	f.Add(rawHeader(&response{Info: &wireFileInfo{Name: "a", Size: 3}}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 2, '{', '}'})
	f.Add([]byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		// Guest side: a request from the host.
		var req request
		if err := readHeader(bytes.NewReader(data), &req, MaxRequestHeader); err == nil {
			if req.Exec != nil {
				checkExec(req.Exec)
			}
			if req.Config != nil {
				req.Config.validate()
			}
			checkPath(req.Path)
		}
		// Host side: a response from the guest, with a tight bound.
		var resp response
		err := readHeader(bytes.NewReader(data), &resp, 64)
		if err == nil {
			if len(data) < 4 || binary.BigEndian.Uint32(data) > 64 {
				t.Fatal("accepted a header over the bound")
			}
			if resp.Error != nil {
				if e := fromWire(resp.Error); len(e.Error()) > maxErrorMsg+64 {
					t.Fatalf("error message not bounded: %d", len(e.Error()))
				}
			}
			if resp.Info != nil {
				toFileInfo(resp.Info, "x", "/x")
			}
		}
	})
}

func FuzzFrames(f *testing.F) {
	f.Add(append(rawFrame(frameStdout, 3, []byte("abc")), rawFrame(frameExit, 10, []byte(`{"code":1}`))...))
	f.Add(rawFrame(frameCredit, 4, []byte{0, 0, 0, 1}))
	f.Add(rawFrame(frameEntries, 14, []byte(`[{"name":"a"}]`)))
	f.Add([]byte{'o', 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		const max = 1024
		fr := newFrameReader(bytes.NewReader(data), max)
		for {
			typ, payload, err := fr.next()
			if err != nil {
				if err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, errProtocol) {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if len(payload) > max {
				t.Fatalf("payload %d over the bound", len(payload))
			}
			// Round trip.
			var buf bytes.Buffer
			if err := writeFrame(&buf, typ, payload); err != nil {
				t.Fatal(err)
			}
			t2, p2, err := newFrameReader(&buf, max).next()
			if err != nil || t2 != typ || !bytes.Equal(p2, payload) {
				t.Fatalf("round trip: %v", err)
			}
		}
	})
}

func FuzzCheckPath(f *testing.F) {
	for _, s := range []string{"/", "/a/b", "a", "/a/../b", "/a//b", "/a/", "/\x00", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if checkPath(p) != nil {
			return
		}
		if p[0] != '/' || bytes.Contains([]byte(p), []byte("/..")) && (len(p) == 3 || bytes.Contains([]byte(p), []byte("/../"))) {
			t.Fatalf("accepted %q", p)
		}
		for _, seg := range bytes.Split([]byte(p[1:]), []byte("/")) {
			if p != "/" && (len(seg) == 0 || string(seg) == "." || string(seg) == "..") {
				t.Fatalf("accepted %q", p)
			}
		}
	})
}

// FuzzClientExec feeds arbitrary guest output to the host's exec state
// machine (frames, credit, exit reports): it must end Wait with a status or
// an error, never panic or hang.
func FuzzClientExec(f *testing.F) {
	f.Add(append(rawFrame(frameStdout, 2, []byte("hi")), rawFrame(frameExit, 10, []byte(`{"code":0}`))...))
	f.Add(rawFrame(frameCredit, 4, []byte{0, 0, 0, 3}))
	f.Add(rawFrame(frameError, 16, []byte(`{"kind":"limit"}`)))
	f.Add(append(rawFrame(frameStderr, 5, []byte("12345")), rawFrame(frameStdout, 1, []byte("x"))...))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := fakeGuest(t, ClientOptions{OutputLimit: 4}, func(st *yamux.Stream, _ *request) {
			st.Write(rawHeader(&response{PID: 1}))
			st.Write(data)
			st.Close()
			io.Copy(io.Discard, st)
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var out bytes.Buffer
		p, err := c.Exec(ctx, sandbox.ExecRequest{Args: []string{"x"}, Stdout: &out, Stderr: &out, Stdin: bytes.NewReader([]byte("in"))})
		if err != nil {
			return
		}
		if _, err := p.Wait(ctx); errors.Is(err, context.DeadlineExceeded) {
			t.Fatal("Wait hung")
		}
		if out.Len() > 4 {
			t.Fatalf("%d bytes copied past the output limit", out.Len())
		}
	})
}
