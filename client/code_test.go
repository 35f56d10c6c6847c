package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/sandbox"
)

// Run Python cells that share state, like a notebook.
func ExampleClient_RunCode() {
	ctx := context.Background()
	c, _ := client.FromEnv()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		panic(err)
	}
	defer c.Delete(ctx, sb.ID)

	if _, err := c.RunCode(ctx, sb.ID, "import math\nr = 2", client.CodeOptions{}); err != nil {
		panic(err)
	}
	res, err := c.RunCode(ctx, sb.ID, "print('area:')\nround(math.pi * r**2, 2)", client.CodeOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Print(res.Stdout)
	fmt.Println(*res.Result)
	// Output:
	// area:
	// 12.57
}

// The code interpreter in a real native sandbox: state, errors, timeouts,
// a dead interpreter replaced, matplotlib images, JavaScript, bad input.
func TestE2ERunCode(t *testing.T) {
	ctx := context.Background()
	c := shared.client(t)
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Delete(ctx, sb.ID)
	names := func() string {
		files, err := c.ListDir(ctx, sb.ID, sb.Workdir)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, f := range files {
			n = append(n, f.Name)
		}
		sort.Strings(n)
		return strings.Join(n, " ")
	}
	before := names()

	r, err := c.RunCode(ctx, sb.ID, "import os\nn = 20\nprint(os.getcwd())\nn + 1", client.CodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Result == nil || *r.Result != "21" || !r.NewInterpreter || strings.TrimSpace(r.Stdout) != sb.Workdir {
		t.Fatalf("first cell: %+v", r)
	}
	r, err = c.RunCode(ctx, sb.ID, "n * 2", client.CodeOptions{})
	if err != nil || r.Result == nil || *r.Result != "40" || r.NewInterpreter || r.ExecutionCount != 2 {
		t.Fatalf("state not kept: %v %+v", err, r)
	}
	r, err = c.RunCode(ctx, sb.ID, "open('/etc/shadow').read()", client.CodeOptions{})
	if err != nil || r.Error == nil || r.Error.Name != "PermissionError" {
		t.Fatalf("the interpreter must have the sandbox's policy: %v %+v", err, r)
	}
	r, err = c.RunCode(ctx, sb.ID, "while True: pass", client.CodeOptions{Timeout: time.Second})
	if err != nil || r.Error == nil || r.Error.Name != "TimeoutError" || r.StateLost {
		t.Fatalf("timeout: %v %+v", err, r)
	}
	r, err = c.RunCode(ctx, sb.ID, "import os; os._exit(9)", client.CodeOptions{})
	if err != nil || r.Error == nil || r.Error.Name != "KernelDied" || !r.StateLost {
		t.Fatalf("a dying interpreter: %v %+v", err, r)
	}
	r, err = c.RunCode(ctx, sb.ID, "'n' in globals()", client.CodeOptions{})
	if err != nil || !r.NewInterpreter || r.Result == nil || *r.Result != "False" {
		t.Fatalf("a new interpreter after one died: %v %+v", err, r)
	}
	// Nothing of the interpreter is left in the workspace.
	if after := names(); after != before {
		t.Fatalf("workspace after run_code: %s, before: %s", after, before)
	}

	if _, err := c.RunCode(ctx, sb.ID, "1", client.CodeOptions{Language: "cobol"}); !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), "cobol") {
		t.Fatalf("bad language: %v", err)
	}
	if _, err := c.RunCode(ctx, sb.ID, " ", client.CodeOptions{}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("empty code: %v", err)
	}
	if _, err := c.RunCode(ctx, "sb-nope", "1", client.CodeOptions{}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("missing sandbox: %v", err)
	}

	t.Run("matplotlib", func(t *testing.T) {
		if res, err := c.Run(ctx, sb.ID, "python3", "-c", "import matplotlib"); err != nil || res.Code != 0 {
			testutil.Skip(t, "matplotlib is not installed for the sandbox's python3 (apt-get install python3-matplotlib)")
		}
		r, err := c.RunCode(ctx, sb.ID, "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.show()", client.CodeOptions{})
		if err != nil || r.Error != nil || len(r.Images) != 1 {
			t.Fatalf("%v %+v", err, r)
		}
		if r.Images[0].Format != "png" || !bytes.HasPrefix(r.Images[0].Data, []byte("\x89PNG")) {
			t.Fatalf("not a PNG: %q", r.Images[0].Data[:8])
		}
	})
	t.Run("javascript", func(t *testing.T) {
		if res, err := c.Run(ctx, sb.ID, "node", "--version"); err != nil || res.Code != 0 {
			testutil.Skip(t, "node is not installed in the sandbox")
		}
		r, err := c.RunCode(ctx, sb.ID, "let k = 6; console.log('js'); k * 7", client.CodeOptions{Language: api.LanguageJavaScript})
		if err != nil || r.Result == nil || *r.Result != "42" || r.Stdout != "js\n" {
			t.Fatalf("%v %+v", err, r)
		}
		r, err = c.RunCode(ctx, sb.ID, "k + 1", client.CodeOptions{Language: api.LanguageJavaScript})
		if err != nil || r.Result == nil || *r.Result != "7" {
			t.Fatalf("%v %+v", err, r)
		}
	})
}
