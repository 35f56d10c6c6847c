package server

import "testing"

// TestKeyLocksAreIndependent: one key held (a tenant's long resume), the
// lock of another key (another tenant's rollback) is had at once; the
// held key's second locker waits until it is released.
func TestKeyLocksAreIndependent(t *testing.T) {
	t.Parallel()
	var k keyLocks
	unlockA := k.lock("sb-a")
	got := make(chan struct{})
	go func() {
		unlockB := k.lock("sb-b")
		unlockB()
		close(got)
	}()
	<-got // would hang (test timeout) were the lock global
	second := make(chan struct{})
	go func() {
		defer close(second)
		k.lock("sb-a")()
	}()
	select {
	case <-second:
		t.Fatal("a second lock of a held key did not wait")
	default:
	}
	unlockA()
	<-second
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.m) != 0 {
		t.Errorf("locks left after every unlock: %v", k.m)
	}
}
