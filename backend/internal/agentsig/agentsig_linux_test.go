package agentsig

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The literal numbers are the kernel's.
func TestNumbers(t *testing.T) {
	want := []unix.Signal{unix.SIGILL, unix.SIGTRAP, unix.SIGBUS, unix.SIGFPE, unix.SIGSEGV, unix.SIGSTKFLT, unix.SIGSYS}
	if len(Fault) != len(want) {
		t.Fatalf("Fault = %v", Fault)
	}
	for i, s := range want {
		if Fault[i] != uint32(s) {
			t.Errorf("Fault[%d] = %d, want %d (%v)", i, Fault[i], s, s)
		}
	}
	if FSetSig != unix.F_SETSIG {
		t.Errorf("FSetSig = %d, want %d", FSetSig, unix.F_SETSIG)
	}
}
