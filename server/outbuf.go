package server

import (
	"sync"
)

// outBuf keeps the tail of a background process's combined output as
// chunks tagged with their stream and byte offset, bounded to limit bytes:
// the oldest chunks are dropped first. Readers follow by offset.
type outBuf struct {
	mu     sync.Mutex
	limit  int
	chunks []chunk
	size   int   // bytes held
	total  int64 // bytes ever written (the next chunk's offset)
	closed bool
	wake   chan struct{}
}

type chunk struct {
	stream string
	off    int64
	data   []byte
}

func newOutBuf(limit int) *outBuf {
	return &outBuf{limit: limit, wake: make(chan struct{})}
}

// writer returns an io.Writer appending to stream.
func (b *outBuf) writer(stream string) *streamSink { return &streamSink{b: b, stream: stream} }

type streamSink struct {
	b      *outBuf
	stream string
}

func (w *streamSink) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	b := w.b
	b.mu.Lock()
	data := append([]byte(nil), p...)
	if len(data) > b.limit {
		// Keep the tail of a huge write only; its offset moves accordingly.
		skip := len(data) - b.limit
		b.total += int64(skip)
		data = data[skip:]
	}
	b.chunks = append(b.chunks, chunk{stream: w.stream, off: b.total, data: data})
	b.size += len(data)
	b.total += int64(len(data))
	for b.size > b.limit && len(b.chunks) > 0 {
		b.size -= len(b.chunks[0].data)
		b.chunks[0] = chunk{}
		b.chunks = b.chunks[1:]
	}
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
	return len(p), nil
}

// close marks the end of output.
func (b *outBuf) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		close(b.wake)
		b.wake = make(chan struct{})
	}
}

// read returns chunks at or after off, the first offset still held (>off
// when bytes were dropped), whether output ended, and a channel closed on
// the next write.
func (b *outBuf) read(off int64) (out []chunk, first int64, ended bool, wake <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	first = b.total
	if len(b.chunks) > 0 {
		first = b.chunks[0].off
	}
	for _, c := range b.chunks {
		end := c.off + int64(len(c.data))
		if end <= off {
			continue
		}
		if c.off < off {
			c = chunk{stream: c.stream, off: off, data: c.data[off-c.off:]}
		}
		out = append(out, c)
	}
	return out, first, b.closed, b.wake
}

func (b *outBuf) written() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}
