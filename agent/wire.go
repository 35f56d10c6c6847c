package agent

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

// ProtocolVersion is exchanged in Hello; host and guest must agree.
const ProtocolVersion = 1

// Bounds of the wire format. Both sides enforce them on every read.
const (
	// MaxRequestHeader bounds a host->guest header (argv and env travel in it).
	MaxRequestHeader = 1 << 20
	// MaxResponseHeader bounds a guest->host header.
	MaxResponseHeader = 64 << 10
	// MaxFramePayload bounds one frame in either direction.
	MaxFramePayload = 1 << 20
	// MaxArgvEnvBytes bounds the total size of argv plus env of one exec.
	MaxArgvEnvBytes = 512 << 10
	// MaxArgs and MaxEnv bound the number of argv and env entries.
	MaxArgs = 1 << 14
	MaxEnv  = 1 << 14
	// MaxListEntries bounds one directory listing as read by the host.
	MaxListEntries = 100000
	// MaxListBytes bounds the memory one listing may take on the host
	// (names, paths and link targets, plus a fixed overhead per entry).
	MaxListBytes      = 32 << 20
	listEntryOverhead = 128
	// MaxPathLen bounds a path in a request (PATH_MAX).
	MaxPathLen = 4096

	// chunkSize is how much data one data frame carries when we send.
	chunkSize = 32 << 10
	// stdinWindow is how many stdin bytes the host may have in flight
	// before the guest acknowledges them with credit frames.
	stdinWindow = 256 << 10
)

// Operations (request Op).
const (
	opHello   = "hello"
	opPing    = "ping"
	opExec    = "exec"
	opRead    = "read"
	opWrite   = "write"
	opStat    = "stat"
	opList    = "list"
	opMkdir   = "mkdir"
	opRemove  = "remove"
	opRename  = "rename"
	opSetMeta = "setmeta" // replace a file's metadata (user.e2b.* xattrs)
	opEgress  = "egress"  // guest -> host
	opDial    = "dial"    // host -> guest: a stream to a port on the guest's loopback
	opWatch   = "watch"   // host -> guest: filesystem events under a path
	// host -> guest: whether to name the program behind egress connections
	opPrograms = "programs"
)

// Frame types.
const (
	// host -> guest
	frameStdin      byte = 'i' // payload: data
	frameStdinClose byte = 'c' // payload: empty
	frameSignal     byte = 's' // payload: [signal, group(0/1)]
	frameResize     byte = 'r' // payload: rows, cols (2x uint16 BE)
	// guest -> host
	frameStdout byte = 'o' // payload: data
	frameStderr byte = 'e' // payload: data
	frameCredit byte = 'k' // payload: uint32 BE stdin bytes consumed
	frameExit   byte = 'x' // payload: JSON exitFrame
	frameError  byte = 'E' // payload: JSON wireError
	// both directions, file streams
	frameData    byte = 'd' // payload: data
	frameEntries byte = 'l' // payload: JSON []wireFileInfo
	frameEnd     byte = 'z' // payload: empty
	frameEvents  byte = 'w' // payload: JSON []wireEvent (watch)
)

// request is the header the opener of a stream sends.
type request struct {
	Op string `json:"op"`

	Config *GuestConfig `json:"config,omitempty"` // hello
	Exec   *execRequest `json:"exec,omitempty"`   // exec

	Path      string `json:"path,omitempty"` // file ops
	To        string `json:"to,omitempty"`   // rename
	Mode      uint32 `json:"mode,omitempty"`
	Parents   bool   `json:"parents,omitempty"` // write (mkdirs), mkdir
	Recursive bool   `json:"recursive,omitempty"`
	// setmeta: the keys (without their attribute prefix, which only the
	// guest adds) and values
	Meta map[string]string `json:"meta,omitempty"`

	Remote string `json:"remote,omitempty"` // egress: peer address as seen by the guest
	// egress: the peer's verified executable, or why there is none (the
	// guest's claim; the host trusts it no more than the guest itself)
	Program    string `json:"program,omitempty"`
	Unverified string `json:"unverified,omitempty"`

	Port int `json:"port,omitempty"` // dial: TCP port on the guest's 127.0.0.1

	Identify bool `json:"identify,omitempty"` // programs: name egress peers from now on
}

// execRequest is the wire form of sandbox.ExecRequest.
type execRequest struct {
	Args    []string `json:"args"`
	Env     []string `json:"env,omitempty"` // "K=V", added to the base environment
	Dir     string   `json:"dir,omitempty"`
	Stdin   bool     `json:"stdin,omitempty"`  // host will stream stdin
	Stdout  bool     `json:"stdout,omitempty"` // host wants stdout
	Stderr  bool     `json:"stderr,omitempty"` // host wants stderr
	TTY     bool     `json:"tty,omitempty"`
	Rows    uint16   `json:"rows,omitempty"`
	Cols    uint16   `json:"cols,omitempty"`
	Timeout int64    `json:"timeout_ns,omitempty"`
	// User is USER[:GROUP], resolved by the guest in its own root.
	User string `json:"user,omitempty"`
}

// response is the header the acceptor answers with.
type response struct {
	Error   *wireError    `json:"error,omitempty"`
	Version int           `json:"version,omitempty"` // hello
	PID     int           `json:"pid,omitempty"`     // hello (agent), exec (process)
	Info    *wireFileInfo `json:"info,omitempty"`    // stat
}

type exitFrame struct {
	Code     int  `json:"code"`
	Signal   int  `json:"signal,omitempty"`
	TimedOut bool `json:"timed_out,omitempty"`
}

type wireFileInfo struct {
	Name    string `json:"name"`
	Size    int64  `json:"size"`
	Mode    uint32 `json:"mode"` // io/fs.FileMode bits
	ModTime int64  `json:"mtime_ns"`
	Link    string `json:"link,omitempty"`
	UID     uint32 `json:"uid"`
	GID     uint32 `json:"gid"`
	Owner   string `json:"owner,omitempty"` // UID's name in the sandbox's /etc/passwd
	Group   string `json:"group,omitempty"` // GID's name in its /etc/group
	// Meta is the file's metadata (user.e2b.* xattrs, prefix stripped).
	Meta map[string]string `json:"meta,omitempty"`
}

// errProtocol marks a peer that broke the protocol. The host ends the
// session when it sees one.
var errProtocol = errors.New("agent protocol violation")

// writeHeader writes v as one length-prefixed JSON header.
func writeHeader(w io.Writer, v any, max int) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > max {
		return fmt.Errorf("header of %d bytes exceeds %d: %w", len(b), max, sandbox.ErrLimit)
	}
	buf := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	_, err = w.Write(buf)
	return err
}

// readHeader reads one length-prefixed JSON header of at most max bytes into v.
func readHeader(r io.Reader, v any, max int) error {
	var lb [4]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(lb[:])
	if n == 0 || uint64(n) > uint64(max) {
		return fmt.Errorf("header length %d out of range (max %d): %w", n, max, errProtocol)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return noEOF(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode header: %v: %w", err, errProtocol)
	}
	return nil
}

// frameReader reads frames with a reused buffer of at most max bytes.
type frameReader struct {
	r   io.Reader
	max int
	hdr [5]byte
	buf []byte
}

func newFrameReader(r io.Reader, max int) *frameReader {
	return &frameReader{r: r, max: max}
}

// next returns the next frame. The payload is only valid until the next call.
func (fr *frameReader) next() (byte, []byte, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(fr.hdr[1:])
	if uint64(n) > uint64(fr.max) {
		return 0, nil, fmt.Errorf("frame length %d exceeds %d: %w", n, fr.max, errProtocol)
	}
	if cap(fr.buf) < int(n) {
		fr.buf = make([]byte, n)
	}
	p := fr.buf[:n]
	if _, err := io.ReadFull(fr.r, p); err != nil {
		return 0, nil, noEOF(err)
	}
	return fr.hdr[0], p, nil
}

// writeFrame writes one frame in a single Write so concurrent writers
// serialised by a mutex never interleave partial frames.
func writeFrame(w io.Writer, typ byte, payload []byte) error {
	if len(payload) > MaxFramePayload {
		return fmt.Errorf("frame of %d bytes exceeds %d: %w", len(payload), MaxFramePayload, sandbox.ErrLimit)
	}
	buf := make([]byte, 5+len(payload))
	buf[0] = typ
	binary.BigEndian.PutUint32(buf[1:], uint32(len(payload)))
	copy(buf[5:], payload)
	_, err := w.Write(buf)
	return err
}

func writeJSONFrame(w io.Writer, typ byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFrame(w, typ, b)
}

// noEOF turns an EOF in the middle of a message into ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func durationFromNS(ns int64) time.Duration {
	if ns < 0 {
		return 0
	}
	return time.Duration(ns)
}
