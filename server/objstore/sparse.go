package objstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/airlock-dev/airlock/sandbox"
)

// A Scan reads a sandbox's files for a checkpoint, a pause, a resume or a
// rollback: by their data extents (a sparse file's holes are never read),
// stopping when ctx ends or when the data it records passes limit. A
// tenant's files thus cost what they hold on disk (bounded by its disk
// quota), never what they claim to hold.
type Scan struct {
	ctx   context.Context
	limit int64 // data bytes it may record (0: no limit)
	what  string
	data  int64 // data bytes recorded so far
	// v1: hashes are plain sha256 of the whole content (manifests of
	// version 1, before issue 24), read hole or not.
	v1 bool
}

// NewScan is a scan for what, bounded by ctx only; v1 hashes as
// manifests of that version did.
func NewScan(ctx context.Context, what string, version int) *Scan {
	return &Scan{ctx: ctx, what: what, v1: version == 1}
}

// NewLimitedScan is a scan for what of the current Version, bounded by
// ctx and by limit data bytes recorded (0: no limit).
func NewLimitedScan(ctx context.Context, what string, limit int64) *Scan {
	return &Scan{ctx: ctx, limit: limit, what: what}
}

// Data is the data bytes the scan recorded so far.
func (sc *Scan) Data() int64 { return sc.data }

// charge counts n data bytes recorded; an error when the scan must stop.
func (sc *Scan) charge(n int64) error {
	if err := sc.ctx.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s: the server's deadline for reading a sandbox's files passed after %d data bytes: %w", sc.what, sc.data, sandbox.ErrTimeout)
		}
		return fmt.Errorf("%s: %w", sc.what, err)
	}
	sc.data += n
	if sc.limit > 0 && sc.data > sc.limit {
		return fmt.Errorf("%s: its files hold more than the %d data bytes left in the quota: %w", sc.what, sc.limit, sandbox.ErrLimit)
	}
	return nil
}

// sparseBlock is the unit of a sparse hash: a block of only zeros counts
// as a hole, wherever the file system keeps it.
const sparseBlock = 64 << 10

// eachBlock calls fn with every block of f (size bytes) that holds a
// non-zero byte, reading only f's data extents and charging sc for what
// fn gets. A block that is zeros, on disk or in a hole, is skipped: the
// result does not depend on how the file is laid out.
func eachBlock(f *os.File, size int64, sc *Scan, fn func(off int64, p []byte) error) error {
	buf := make([]byte, sparseBlock)
	next := int64(0) // first block not yet read
	return dataExtents(f, size, func(start, end int64) error {
		for blk := max(start/sparseBlock, next); blk*sparseBlock < end; blk++ {
			if err := sc.ctx.Err(); err != nil {
				return sc.charge(0)
			}
			off := blk * sparseBlock
			p := buf[:min(sparseBlock, size-off)]
			n, err := f.ReadAt(p, off)
			if err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			clear(p[n:]) // it shrank meanwhile: read as zeros
			next = blk + 1
			if allZero(p) {
				continue
			}
			if err := sc.charge(int64(len(p))); err != nil {
				return err
			}
			if err := fn(off, p); err != nil {
				return err
			}
		}
		return nil
	})
}

func allZero(p []byte) bool {
	for len(p) >= 8 {
		if binary.LittleEndian.Uint64(p) != 0 {
			return false
		}
		p = p[8:]
	}
	for _, b := range p {
		if b != 0 {
			return false
		}
	}
	return true
}

// sparseHash is a file's content hash in manifests of version 2: sha256
// over its size and, for each block holding a non-zero byte, the block's
// index and bytes. Equal contents hash equal whatever their holes; a 2
// TiB file of one written block hashes in microseconds. With out set,
// each such block is also written there (at its offset).
func sparseHash(f *os.File, size int64, sc *Scan, out *os.File) (string, error) {
	if sc.v1 {
		h := sha256.New()
		n, err := io.Copy(h, io.NewSectionReader(f, 0, size))
		if err == nil {
			err = sc.charge(n)
		}
		return hex.EncodeToString(h.Sum(nil)), err
	}
	h := sha256.New()
	var hdr [8]byte
	h.Write([]byte("airlock sparse sha256\n"))
	binary.BigEndian.PutUint64(hdr[:], uint64(size))
	h.Write(hdr[:])
	err := eachBlock(f, size, sc, func(off int64, p []byte) error {
		binary.BigEndian.PutUint64(hdr[:], uint64(off/sparseBlock))
		h.Write(hdr[:])
		h.Write(p)
		if out != nil {
			_, err := out.WriteAt(p, off)
			return err
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}

// copySparse copies src (size bytes) to dst, writing only its blocks
// that hold data: holes stay holes.
func copySparse(dst, src *os.File, size int64, sc *Scan) error {
	err := eachBlock(src, size, sc, func(off int64, p []byte) error {
		_, err := dst.WriteAt(p, off)
		return err
	})
	if err != nil {
		return err
	}
	return dst.Truncate(size)
}
