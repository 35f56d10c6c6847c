package wasm

import (
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// memLimit is one process's linear-memory budget. Growing past it fails
// (memory.grow returns -1 to the guest) and calls onExceed, which stops
// the module: a guest that ignores the failed grow does not keep running.
type memLimit struct {
	limit    uint64 // bytes; 0 means wasm32's 4 GiB
	onExceed func()
	exceeded atomic.Bool
	size     atomic.Uint64
	peak     atomic.Uint64
}

// Allocate implements experimental.MemoryAllocator.
func (m *memLimit) Allocate(capacity, maxBytes uint64) experimental.LinearMemory {
	if m.limit > 0 {
		capacity = min(capacity, m.limit)
	}
	return &limitedMemory{m: m, capacity: capacity}
}

type limitedMemory struct {
	m        *memLimit
	capacity uint64
	buf      []byte
}

// Reallocate implements experimental.LinearMemory.
func (l *limitedMemory) Reallocate(size uint64) []byte {
	if l.m.limit > 0 && size > l.m.limit {
		if !l.m.exceeded.Swap(true) && l.m.onExceed != nil {
			l.m.onExceed()
		}
		return nil
	}
	if size <= uint64(cap(l.buf)) {
		l.buf = l.buf[:size]
	} else {
		c := max(size, min(2*uint64(cap(l.buf)), l.limitOr4G()), l.capacity)
		nb := make([]byte, size, c)
		copy(nb, l.buf)
		l.buf = nb
	}
	l.m.size.Store(size)
	if size > l.m.peak.Load() {
		l.m.peak.Store(size)
	}
	return l.buf
}

func (l *limitedMemory) limitOr4G() uint64 {
	if l.m.limit > 0 {
		return l.m.limit
	}
	return 1 << 32
}

// Free implements experimental.LinearMemory.
func (l *limitedMemory) Free() {
	l.buf = nil
	l.m.size.Store(0)
}
