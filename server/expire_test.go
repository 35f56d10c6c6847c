package server

import (
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
)

// The reaper's rule for keep_alive {while: processes}.
func TestExpiredWhileProcesses(t *testing.T) {
	ls := &lifeState{keepWhile: api.KeepAliveWhileProcesses, keepIdle: 10}
	now := time.Unix(1000, 0)
	if ls.expiredWhile(true, now, 0, 1) {
		t.Error("expired while a process runs")
	}
	if ls.expiredWhile(true, now.Add(5), 0, 0) {
		t.Error("expired within its idle time after the last process")
	}
	if !ls.expiredWhile(true, now.Add(11), 0, 0) {
		t.Error("not expired past its idle time")
	}
	if ls.expiredWhile(false, now.Add(100), 0, 0) {
		t.Error("expired before its timeout")
	}
	plain := &lifeState{}
	if !plain.expiredWhile(true, now, 0, 1) {
		t.Error("keep_alive false: a process must not keep it")
	}
}
