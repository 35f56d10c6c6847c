package interp

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/sandbox"
)

// streamed runs code with o and returns the result and its stdout.
func streamed(t *testing.T, k *Kernel, code string, timeout time.Duration, env map[string]string) (*Result, string) {
	t.Helper()
	var mu sync.Mutex
	var out strings.Builder
	r, err := k.RunWith(context.Background(), code, timeout, CellOptions{Env: env, OnOutput: func(name, text string) {
		mu.Lock()
		defer mu.Unlock()
		if name == "stdout" {
			out.WriteString(text)
		}
	}})
	if err != nil {
		t.Fatalf("run %q: %v", code, err)
	}
	mu.Lock()
	defer mu.Unlock()
	return r, out.String()
}

func startBash(t *testing.T) *Kernel {
	t.Helper()
	testutil.RequireBinary(t, "python3")
	testutil.RequireBinary(t, "bash")
	return startKernel(t, Bash)
}

// TestBashTimeoutKeepsState: an interrupted bash cell ends (what follows
// the interrupted command does not run) and the context keeps its
// variables, arrays and directory; a bash dying of SIGINT, as a
// non-interactive one does, would lose them.
func TestBashTimeoutKeepsState(t *testing.T) {
	k := startBash(t)
	if r, _ := streamed(t, k, "v=kept; arr=(a b); cd /tmp", 30*time.Second, nil); r.Error != nil {
		t.Fatalf("first cell: %+v", r.Error)
	}
	for _, cell := range []string{"sleep 60; echo after", "while :; do :; done; echo after", "f() { sleep 60; }; f; echo after"} {
		r, out := streamed(t, k, cell, time.Second, nil)
		if r.Error == nil || r.Error.Name != ErrNameTimeout || r.Lost {
			t.Fatalf("%q: want a timeout with the state kept, got %+v %+v", cell, r, r.Error)
		}
		if strings.Contains(out, "after") {
			t.Fatalf("%q: the cell went on after the interrupt: %q", cell, out)
		}
		if _, out := streamed(t, k, `echo "$v ${arr[1]} $PWD"`, 30*time.Second, nil); out != "kept b /tmp\n" {
			t.Fatalf("after interrupting %q: %q", cell, out)
		}
	}
}

// TestCellEnv: a cell's environment is seen by the cell and what it starts,
// and is put back after it (a variable set before keeps its value, one
// that was not set is gone), in every language; after an interrupted bash
// cell too.
func TestCellEnv(t *testing.T) {
	cases := []struct {
		lang, set, show, unset string
	}{
		{Python, `import os; os.environ["K"] = "before"`, `import os, subprocess; print(os.environ.get("K"), os.environ.get("X"), subprocess.run(["sh", "-c", "echo $X"], capture_output=True, text=True).stdout, end="")`, `None`},
		{JavaScript, `process.env.K = "before"`, `console.log(process.env.K, process.env.X, require("child_process").execSync("echo $X").toString().trim())`, `undefined`},
		{Bash, `export K=before`, `echo "${K-None} ${X-None} $(sh -c 'echo $X')"`, `None`},
	}
	for _, c := range cases {
		t.Run(c.lang, func(t *testing.T) {
			var k *Kernel
			if c.lang == Bash {
				k = startBash(t)
			} else {
				k = startKernel(t, c.lang)
			}
			streamed(t, k, c.set, 30*time.Second, nil)
			env := map[string]string{"K": "cell", "X": "it's $HOME"}
			if _, out := streamed(t, k, c.show, 30*time.Second, env); out != "cell it's $HOME it's $HOME\n" {
				t.Fatalf("in the cell: %q", out)
			}
			want := "before " + c.unset + " \n"
			if _, out := streamed(t, k, c.show, 30*time.Second, nil); out != want {
				t.Fatalf("after the cell: %q, want %q", out, want)
			}
			if c.lang == Bash {
				if r, _ := streamed(t, k, "sleep 60", time.Second, env); r.Error == nil || r.Error.Name != ErrNameTimeout {
					t.Fatalf("want a timeout: %+v", r.Error)
				}
				if _, out := streamed(t, k, c.show, 30*time.Second, nil); out != want {
					t.Fatalf("after an interrupted cell: %q, want %q", out, want)
				}
			}
			_, err := k.RunWith(context.Background(), "1", time.Second, CellOptions{Env: map[string]string{"A-B": "x"}})
			if !errors.Is(err, sandbox.ErrInvalid) {
				t.Fatalf("a name that is no identifier: %v", err)
			}
		})
	}
}
