package microvm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// qmp is a client of QEMU's machine protocol (JSON lines on a unix
// socket). One command at a time; events are skipped.
type qmp struct {
	mu   sync.Mutex
	conn *net.UnixConn
	r    *bufio.Reader
}

// dialQMP connects and negotiates capabilities, retrying until the socket
// appears or ctx ends.
func dialQMP(ctx context.Context, path string, done <-chan struct{}) (*qmp, error) {
	var c net.Conn
	var err error
	for {
		var d net.Dialer
		if c, err = d.DialContext(ctx, "unix", path); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("qmp: %w", errors.Join(err, ctx.Err()))
		case <-done:
			return nil, errors.New("qmp: qemu exited")
		case <-time.After(2 * time.Millisecond):
		}
	}
	q := &qmp{conn: c.(*net.UnixConn), r: bufio.NewReaderSize(c, 64<<10)}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
		defer c.SetDeadline(time.Time{})
	}
	if _, err := q.r.ReadBytes('\n'); err != nil { // the greeting
		c.Close()
		return nil, fmt.Errorf("qmp greeting: %w", err)
	}
	if _, err := q.run(ctx, "qmp_capabilities", nil, nil); err != nil {
		c.Close()
		return nil, err
	}
	return q, nil
}

type qmpReply struct {
	Return json.RawMessage `json:"return"`
	Error  *struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	} `json:"error"`
	Event string `json:"event"`
}

// run executes one command; file, when set, is passed with it (getfd).
func (q *qmp) run(ctx context.Context, cmd string, args any, file *os.File) (json.RawMessage, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	req := map[string]any{"execute": cmd}
	if args != nil {
		req["arguments"] = args
	}
	b, _ := json.Marshal(req)
	if dl, ok := ctx.Deadline(); ok {
		q.conn.SetDeadline(dl)
		defer q.conn.SetDeadline(time.Time{})
	}
	var err error
	if file != nil {
		_, _, err = q.conn.WriteMsgUnix(b, syscall.UnixRights(int(file.Fd())), nil)
	} else {
		_, err = q.conn.Write(b)
	}
	if err != nil {
		return nil, fmt.Errorf("qmp %s: %w", cmd, err)
	}
	for {
		line, err := q.r.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("qmp %s: %w", cmd, err)
		}
		var r qmpReply
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("qmp %s: bad reply: %w", cmd, err)
		}
		if r.Event != "" {
			continue
		}
		if r.Error != nil {
			return nil, fmt.Errorf("qmp %s: %s: %s", cmd, r.Error.Class, r.Error.Desc)
		}
		return r.Return, nil
	}
}

// status is query-status's run state ("running", "paused", "inmigrate", ...).
func (q *qmp) status(ctx context.Context) (string, error) {
	raw, err := q.run(ctx, "query-status", nil, nil)
	if err != nil {
		return "", err
	}
	var s struct {
		Status string `json:"status"`
	}
	err = json.Unmarshal(raw, &s)
	return s.Status, err
}

func (q *qmp) close() { q.conn.Close() }
