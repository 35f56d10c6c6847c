package client_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

// Create a sandbox, run a command in it, and delete it.
func Example() {
	ctx := context.Background()
	c, err := client.FromEnv() // $AIRLOCK_HOST, $AIRLOCK_API_KEY; default: the local socket
	if err != nil {
		panic(err)
	}
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Profile: "default", Labels: map[string]string{"example": "yes"}})
	if err != nil {
		panic(err)
	}
	defer c.Delete(ctx, sb.ID)

	res, err := c.Run(ctx, sb.ID, "sh", "-c", "echo hello from $(uname -s)")
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s", res.Stdout)
	fmt.Println("exit", res.Code)
	// Output:
	// hello from Linux
	// exit 0
}

// Stream a command's output as it comes, feeding it input.
func ExampleClient_Exec() {
	ctx := context.Background()
	c, _ := client.FromEnv()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		panic(err)
	}
	defer c.Delete(ctx, sb.ID)

	ex, err := c.Exec(ctx, sb.ID, client.ExecOptions{
		Args:   []string{"tr", "a-z", "A-Z"},
		Stdin:  strings.NewReader("shout\n"),
		Stdout: os.Stdout,
		Stderr: os.Stderr,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("exit", ex.Code)
	// Output:
	// SHOUT
	// exit 0
}

// Start a background process, then follow its output and wait for it.
func ExampleClient_Start() {
	ctx := context.Background()
	c, _ := client.FromEnv()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		panic(err)
	}
	defer c.Delete(ctx, sb.ID)

	p, err := c.Start(ctx, sb.ID, client.ExecOptions{Args: []string{"sh", "-c", "for i in 1 2 3; do echo tick $i; sleep 0.01; done"}})
	if err != nil {
		panic(err)
	}
	ex, err := c.Output(ctx, sb.ID, p.ID, client.OutputOptions{Follow: true, Stdout: os.Stdout})
	if err != nil {
		panic(err)
	}
	fmt.Println("exit", ex.Code)
	// Output:
	// tick 1
	// tick 2
	// tick 3
	// exit 0
}

// Write a file into a sandbox and read it back.
func ExampleClient_WriteFile() {
	ctx := context.Background()
	c, _ := client.FromEnv()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		panic(err)
	}
	defer c.Delete(ctx, sb.ID)

	if err := c.WriteFile(ctx, sb.ID, "/tmp/notes/hello.txt", strings.NewReader("hi there\n"), 0o644); err != nil {
		panic(err)
	}
	rc, err := c.ReadFile(ctx, sb.ID, "/tmp/notes/hello.txt")
	if err != nil {
		panic(err)
	}
	defer rc.Close()
	io.Copy(os.Stdout, rc)
	fi, _ := c.Stat(ctx, sb.ID, "/tmp/notes/hello.txt")
	fmt.Println(fi.Size, fi.Mode)
	// Output:
	// hi there
	// 9 -rw-r--r--
}

// Run a shell on a terminal and type into it.
func ExampleClient_PTY() {
	ctx := context.Background()
	c, _ := client.FromEnv()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		panic(err)
	}
	defer c.Delete(ctx, sb.ID)

	t, err := c.PTY(ctx, sb.ID, client.PTYOptions{Args: []string{"sh", "-c", "read name; echo hello $name; stty size"}, Rows: 24, Cols: 80})
	if err != nil {
		panic(err)
	}
	defer t.Close()
	t.Write([]byte("world\n"))
	var screen bytes.Buffer
	io.Copy(&screen, t) // until the process exits
	ex, _ := t.Wait(ctx)
	// The terminal echoes the input and ends lines with CR LF.
	fmt.Print(strings.ReplaceAll(screen.String(), "\r\n", "\n"))
	fmt.Println("exit", ex.Code)
	// Output:
	// world
	// hello world
	// 24 80
	// exit 0
}
