package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func init() {
	commands["killself"] = cmdKillSelf
	commands["tty"] = cmdTTY
	commands["spawn"] = cmdSpawn
	commands["spawn-child"] = cmdSpawnChild
	commands["alive"] = cmdAlive
	commands["spawn-bg"] = cmdSpawnBg
	commands["serve"] = cmdServe
}

// cmdServe is `serve PORT`: it answers every connection to
// 127.0.0.1:PORT with one line.
func cmdServe(a []string) int {
	l, err := net.Listen("tcp", "127.0.0.1:"+a[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for {
		c, err := l.Accept()
		if err != nil {
			return 1
		}
		fmt.Fprintf(c, "hello from %s\n", a[0])
		c.Close()
	}
}

// cmdKillSelf is `killself SIG`: the helper kills itself with SIG.
func cmdKillSelf(a []string) int {
	syscall.Kill(os.Getpid(), syscall.Signal(atoi(a[0])))
	time.Sleep(10 * time.Second)
	return 3
}

// cmdTTY is `tty`.
func cmdTTY([]string) int {
	// Report whether stdin is a terminal and its size, then the size
	// after the first SIGWINCH.
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	ws, err := unix.IoctlGetWinsize(0, unix.TIOCGWINSZ)
	if err != nil {
		fmt.Printf("notty %v\n", err)
		return 1
	}
	fmt.Printf("tty %d %d\n", ws.Row, ws.Col)
	select {
	case <-winch:
	case <-time.After(60 * time.Second):
		fmt.Println("no SIGWINCH")
		return 1
	}
	ws, err = unix.IoctlGetWinsize(0, unix.TIOCGWINSZ)
	if err != nil {
		fmt.Printf("notty %v\n", err)
		return 1
	}
	fmt.Printf("winch %d %d\n", ws.Row, ws.Col)
	return 0
}

// cmdSpawn is `spawn N`: start N sleepers.
func cmdSpawn(a []string) int {
	self, _ := os.Executable()
	n := atoi(a[0])
	var kids []*exec.Cmd
	defer func() {
		for _, k := range kids {
			k.Process.Kill()
			k.Wait()
		}
	}()
	for i := 0; i < n; i++ {
		c := exec.Command(self, "sleep", "60")
		if err := c.Start(); err != nil {
			fmt.Printf("spawned %d of %d: %v\n", i, n, err)
			return 1
		}
		kids = append(kids, c)
	}
	fmt.Printf("spawned %d of %d\n", n, n)
	return 0
}

// cmdSpawnChild is `spawn-child SEC`: a sleeper in our group, then sleep.
func cmdSpawnChild(a []string) int {
	self, _ := os.Executable()
	c := exec.Command(self, "sleep", a[0])
	if err := c.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%d\n", c.Process.Pid)
	c.Wait()
	return 0
}

// cmdAlive is `alive PID`: 0 while PID runs (a zombie is dead).
func cmdAlive(a []string) int {
	b, err := os.ReadFile("/proc/" + a[0] + "/stat")
	if err != nil {
		return 1
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) && s[i+2] == 'Z' {
		return 1
	}
	return 0
}

// cmdSpawnBg is `spawn-bg SEC`: a detached sleeper that outlives us.
func cmdSpawnBg(a []string) int {
	self, _ := os.Executable()
	c := exec.Command(self, "sleep", a[0])
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%d\n", c.Process.Pid)
	return 0
}
