// Package outbuf keeps the tail of a background process's output for
// readers that follow it by byte offset. It bounds what it holds (the
// oldest output is dropped first, and a reader learns how much), never
// blocks a writer on a reader, and knows nothing of HTTP or processes.
package outbuf

import (
	"io"
	"sync"
)

// Buf keeps the tail of a background process's combined output as
// chunks tagged with their stream and byte offset, bounded to limit bytes:
// the oldest chunks are dropped first. Readers follow by offset.
type Buf struct {
	mu     sync.Mutex
	limit  int
	chunks []Chunk
	size   int   // bytes held
	total  int64 // bytes ever written (the next Chunk's offset)
	closed bool
	wake   chan struct{}
}

// A Chunk is output written in one call: its stream, its offset in all
// output written, and its bytes.
type Chunk struct {
	Stream string
	Off    int64
	Data   []byte
}

// New is a Buf holding at most limit bytes.
func New(limit int) *Buf {
	return &Buf{limit: limit, wake: make(chan struct{})}
}

// Writer returns an io.Writer appending to stream.
func (b *Buf) Writer(stream string) io.Writer { return &streamSink{b: b, stream: stream} }

// A streamSink appends to one stream of a Buf.
type streamSink struct {
	b      *Buf
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
	b.chunks = append(b.chunks, Chunk{Stream: w.stream, Off: b.total, Data: data})
	b.size += len(data)
	b.total += int64(len(data))
	for b.size > b.limit && len(b.chunks) > 0 {
		b.size -= len(b.chunks[0].Data)
		b.chunks[0] = Chunk{}
		b.chunks = b.chunks[1:]
	}
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
	return len(p), nil
}

// Close marks the end of output.
func (b *Buf) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		close(b.wake)
		b.wake = make(chan struct{})
	}
}

// Read returns chunks at or after off, the first offset still held (>off
// when bytes were dropped), whether output ended, and a channel closed on
// the next write.
func (b *Buf) Read(off int64) (out []Chunk, first int64, ended bool, wake <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	first = b.total
	if len(b.chunks) > 0 {
		first = b.chunks[0].Off
	}
	for _, c := range b.chunks {
		end := c.Off + int64(len(c.Data))
		if end <= off {
			continue
		}
		if c.Off < off {
			c = Chunk{Stream: c.Stream, Off: off, Data: c.Data[off-c.Off:]}
		}
		out = append(out, c)
	}
	return out, first, b.closed, b.wake
}

// Written is the bytes ever written.
func (b *Buf) Written() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}
