// Command cluster keeps a test cluster (internal/testutil/kubecluster) up
// for manual work: it starts one, prints its kubeconfig and kubectl, and
// stops it (restoring the host) on SIGINT or SIGTERM.
//
//	make build && go run ./test/kube/cmd/cluster -airlock bin/airlock
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil/kubecluster"
)

func main() {
	airlock := flag.String("airlock", "bin/airlock", "the airlock binary the airlock handler runs")
	logs := flag.String("logs", "", "keep the components' logs in this dir")
	flag.Parse()
	bin, err := filepath.Abs(*airlock)
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cluster: -airlock %s: %v (make build)\n", *airlock, err)
		os.Exit(125)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t0 := time.Now()
	c, err := kubecluster.Start(ctx, kubecluster.Options{Airlock: bin, LogDir: *logs})
	if err != nil {
		fmt.Fprintf(os.Stderr, "cluster: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("cluster up in %s\nexport KUBECONFIG=%s\nalias kubectl=%s\nlogs: %s\n(Ctrl-C stops it and restores the host)\n",
		time.Since(t0).Round(time.Millisecond), c.Kubeconfig, filepath.Join(c.BinDir, "kubectl"), c.LogDir)
	<-ctx.Done()
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "cluster: stop: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("cluster stopped; host restored")
}
