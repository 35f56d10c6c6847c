package client_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/client"
)

func (s *serveProc) start() error {
	logf, err := os.OpenFile(s.data+".log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		os.MkdirAll(filepath.Dir(s.data), 0o700)
		if logf, err = os.OpenFile(s.data+".log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err != nil {
			return err
		}
	}
	s.log = logf
	s.cmd = exec.Command(airlockBin, s.args...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	// The server must not outlive a test binary that dies (a panic in an
	// example): the parent-death signal ends it.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := s.cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	c, err := client.New("unix://" + s.socket)
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("airlock serve exited: %v; log:\n%s", err, s.logText())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Health(ctx)
		cancel()
		if err == nil {
			go func() { <-exited }()
			return nil
		}
		if time.Now().After(deadline) {
			s.cmd.Process.Kill()
			return fmt.Errorf("airlock serve did not answer: %v; log:\n%s", err, s.logText())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop asks the server to shut down (SIGTERM) and waits for it.
func (s *serveProc) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	for i := 0; i < 600; i++ {
		if syscall.Kill(s.cmd.Process.Pid, 0) != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.log.Close()
}

// kill9 kills the server with SIGKILL (a crash) and waits until it is gone.
func (s *serveProc) kill9() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	for i := 0; i < 600; i++ {
		if syscall.Kill(s.cmd.Process.Pid, 0) != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.log.Close()
}
