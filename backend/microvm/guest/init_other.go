//go:build !linux

package guest

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/airlock-dev/airlock/agent"
)

// Main is only meaningful as a Linux VM's init.
func Main(serve func(context.Context, io.ReadWriteCloser, agent.ServeOptions) error) int {
	fmt.Fprintln(os.Stderr, "airlock __vminit: only runs as a Linux guest's init")
	return 2
}
