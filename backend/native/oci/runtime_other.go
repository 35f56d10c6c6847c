//go:build !linux

package oci

import (
	"context"
	"fmt"
	"log/slog"
	"syscall"

	"github.com/airlock-dev/airlock/errdefs"
)

var errNotLinux = fmt.Errorf("the airlock OCI runtime needs Linux: %w", errdefs.ErrUnavailable)

// Runtime is the OCI runtime; off Linux every command fails.
type Runtime struct {
	Root     string
	Operator *OperatorConfig
	Binary   string
	Log      *slog.Logger
}

// CreateOpts are `create`'s flags.
type CreateOpts struct {
	Bundle, PidFile, ConsoleSocket string
	NoPivot                        bool
}

// ExecOpts are `exec`'s flags.
type ExecOpts struct {
	Process                string
	Args                   []string
	Cwd                    string
	Env                    []string
	TTY                    bool
	PidFile, ConsoleSocket string
	Detach                 bool
}

// Hidden subcommands (Linux only).
const (
	InitCommand     = "__oci-init"
	ExecInitCommand = "__oci-exec"
	MonitorCommand  = "__oci-monitor"
	DefaultRoot     = "/run/airlock-runc"
)

// ErrNotExist and ErrNotRunning carry runc's wording.
var (
	ErrNotExist   = fmt.Errorf("container does not exist: %w", errdefs.ErrNotFound)
	ErrNotRunning = fmt.Errorf("container not running: %w", errdefs.ErrNotFound)
)

func (r *Runtime) Create(context.Context, string, CreateOpts) error    { return errNotLinux }
func (r *Runtime) Start(context.Context, string) error                 { return errNotLinux }
func (r *Runtime) State(string) (any, error)                           { return nil, errNotLinux }
func (r *Runtime) List() ([]any, error)                                { return nil, errNotLinux }
func (r *Runtime) Kill(string, syscall.Signal, bool) error             { return errNotLinux }
func (r *Runtime) Delete(context.Context, string, bool) error          { return errNotLinux }
func (r *Runtime) Ps(string) ([]int, error)                            { return nil, errNotLinux }
func (r *Runtime) Exec(context.Context, string, ExecOpts) (int, error) { return -1, errNotLinux }
func InitMain() int                                                    { return 1 }
func ExecInitMain() int                                                { return 1 }
func MonitorMain([]string) int                                         { return 1 }

// Version is the runtime's version line.
func Version(version string) string { return "runc version " + version + " (airlock)\n" }

// Features fails off Linux.
func Features(string) any { return nil }

// CloseInheritedFDs does nothing off Linux.
func CloseInheritedFDs() {}
