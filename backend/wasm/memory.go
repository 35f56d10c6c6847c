package wasm

import (
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// memLimit is one process's view of its sandbox's memory budget: the
// linear memories of all the sandbox's running modules together stay
// within the policy's memory limit, like a cgroup's. Growing past it fails
// (memory.grow returns -1 to the guest) and calls onExceed, which stops the
// module: a guest that ignores the failed grow does not keep running.
type memLimit struct {
	limit    uint64        // bytes; 0 means wasm32's 4 GiB per module
	pool     *atomic.Int64 // bytes in use by the sandbox's modules
	poolPeak *atomic.Int64 // the most pool ever held
	onExceed func()
	exceeded atomic.Bool
	size     atomic.Uint64 // this process's linear memory
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
	m := l.m
	delta := int64(size) - int64(len(l.buf))
	if m.limit > 0 && delta > 0 {
		if used := m.pool.Add(delta); used > int64(m.limit) {
			m.pool.Add(-delta)
			if !m.exceeded.Swap(true) && m.onExceed != nil {
				m.onExceed()
			}
			return nil
		}
	} else {
		m.pool.Add(delta)
	}
	if size <= uint64(cap(l.buf)) {
		l.buf = l.buf[:size]
	} else {
		c := max(size, min(2*uint64(cap(l.buf)), l.limitOr4G()), l.capacity)
		nb := make([]byte, size, c)
		copy(nb, l.buf)
		l.buf = nb
	}
	m.size.Store(size)
	if used := m.pool.Load(); used > m.poolPeak.Load() {
		m.poolPeak.Store(used)
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
	l.m.pool.Add(-int64(len(l.buf)))
	l.buf = nil
	l.m.size.Store(0)
}
