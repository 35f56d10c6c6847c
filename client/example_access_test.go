package client_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

// Serve a page inside a sandbox and fetch it through the port route.
func ExampleClient_URL() {
	ctx := context.Background()
	c, _ := client.FromEnv()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		panic(err)
	}
	defer c.Delete(ctx, sb.ID)
	c.WriteFile(ctx, sb.ID, "/tmp/site/index.html", strings.NewReader("hello from port 8000\n"), 0)
	c.Start(ctx, sb.ID, client.ExecOptions{Args: []string{"python3", "-m", "http.server", "8000", "--bind", "127.0.0.1", "--directory", "/tmp/site"}})
	// The server in the sandbox takes a moment to listen: poll, within a
	// deadline.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		// c.HTTPClient reaches the server (its unix socket too); a
		// browser would use c.PortToken's URL instead.
		resp, err := c.HTTPClient().Get(c.URL(sb.ID, 8000) + "index.html")
		if err != nil {
			panic(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			fmt.Print(string(b))
			break
		}
		if time.Now().After(deadline) {
			panic("the page did not answer within a minute: " + resp.Status)
		}
	}
	// Output:
	// hello from port 8000
}

// Watch a directory while a command writes into it.
func ExampleClient_WatchFiles() {
	ctx := context.Background()
	c, _ := client.FromEnv()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		panic(err)
	}
	defer c.Delete(ctx, sb.ID)
	c.Run(ctx, sb.ID, "mkdir", "/tmp/out")
	w, err := c.WatchFiles(ctx, sb.ID, "/tmp/out", false)
	if err != nil {
		panic(err)
	}
	defer w.Close()
	c.Run(ctx, sb.ID, "sh", "-c", "echo done > /tmp/out/result && mv /tmp/out/result /tmp/out/final")
	for i := 0; i < 3; i++ {
		e, _ := w.Next()
		if e.From != "" {
			fmt.Println(e.Op, e.From, "->", e.Path)
		} else {
			fmt.Println(e.Op, e.Path)
		}
	}
	// Output:
	// create /tmp/out/result
	// write /tmp/out/result
	// rename /tmp/out/result -> /tmp/out/final
}
