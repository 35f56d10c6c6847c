package sessclient

import (
	"errors"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"unicode/utf8"
	"unsafe"
)

// Request is the first message of a connection (JSON); the caller's
// stdin, stdout and stderr ride with it (SCM_RIGHTS).
type Request struct {
	Args []string `json:"args,omitempty"`
	TTY  bool     `json:"tty,omitempty"`
	Rows uint16   `json:"rows,omitempty"`
	Cols uint16   `json:"cols,omitempty"`
	End  bool     `json:"end,omitempty"`
}

// Reply is the daemon's last message: the exit code, and why airlock
// failed when it did, as one line (FormatReply).
type Reply struct {
	Code  int
	Error string
}

// Control frames from the client after the request: a type byte and a
// big-endian uint32.
const (
	CtlSignal = 's' // the signal number
	CtlResize = 'r' // rows<<16 | cols
)

// exitAirlock is main's exit code for airlock's own failures.
const exitAirlock = 125

// ErrDir is why a session directory is refused.
var ErrDir = errors.New("not a directory of this user with mode 0700")

// Dir is the caller's own directory of session sockets: root's under
// /run, a user's under XDG_RUNTIME_DIR (else /tmp), made 0700 and refused
// when another user owns it or it is not a plain directory.
func Dir() (string, error) {
	uid := os.Getuid()
	dir := "/run/airlock/sessions"
	if uid != 0 {
		if rt := os.Getenv("XDG_RUNTIME_DIR"); rt != "" && rt[0] == '/' {
			dir = rt + "/airlock-sessions"
		} else {
			dir = "/tmp/airlock-sessions-" + strconv.Itoa(uid)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", wrap("session directory", err)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err != nil {
		return "", wrap("session directory", err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR || int(st.Uid) != uid || st.Mode&0o077 != 0 {
		return "", wrap("session directory "+dir+": uid "+strconv.Itoa(uid), ErrDir)
	}
	return dir, nil
}

// Dial connects to the socket at path; the descriptor is close-on-exec.
func Dial(path string) (int, error) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

func init() {
	if len(os.Args) < 3 || os.Args[1] != "run" {
		return
	}
	if code, ok := fast(os.Args[2:]); ok {
		os.Exit(code)
	}
}

// fast runs the plain case of a session command: a known set of flags
// with --session, a command, and a daemon already serving the key. ok is
// false when it did nothing and main must handle the command.
func fast(args []string) (code int, ok bool) {
	flags, argv, ok := ParseFlags(args)
	if !ok || len(argv) == 0 {
		return 0, false
	}
	if name, _ := Lookup(flags, "session"); name == "" {
		return 0, false
	}
	if end, _ := Lookup(flags, "end"); end == "true" {
		return 0, false
	}
	dir, err := Dir()
	if err != nil {
		return 0, false
	}
	fd, err := Dial(dir + "/" + Key(flags) + ".sock")
	if err != nil {
		return 0, false // none yet, or a crashed one: main starts it
	}
	return CallTerm(fd, Request{Args: argv}), true
}

// terminal is the caller's terminal while a command with a PTY runs:
// raw mode (termios(3)'s cfmakeraw) on the way in, restored on the way
// out.
type terminal struct {
	saved *syscall.Termios
	winch chan os.Signal
}

func ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), req, uintptr(arg)); e != 0 {
		return e
	}
	return nil
}

func getTermios(fd int) (*syscall.Termios, error) {
	var t syscall.Termios
	return &t, ioctl(fd, syscall.TCGETS, unsafe.Pointer(&t))
}

func isTerminal(fd int) bool {
	_, err := getTermios(fd)
	return err == nil
}

func makeRaw(fd int) (*syscall.Termios, error) {
	saved, err := getTermios(fd)
	if err != nil {
		return nil, err
	}
	raw := *saved
	raw.Iflag &^= syscall.IGNBRK | syscall.BRKINT | syscall.PARMRK | syscall.ISTRIP | syscall.INLCR | syscall.IGNCR | syscall.ICRNL | syscall.IXON
	raw.Oflag &^= syscall.OPOST
	raw.Lflag &^= syscall.ECHO | syscall.ECHONL | syscall.ICANON | syscall.ISIG | syscall.IEXTEN
	raw.Cflag &^= syscall.CSIZE | syscall.PARENB
	raw.Cflag |= syscall.CS8
	raw.Cc[syscall.VMIN], raw.Cc[syscall.VTIME] = 1, 0
	return saved, ioctl(fd, syscall.TCSETS, unsafe.Pointer(&raw))
}

func (t *terminal) restore() {
	if t.saved != nil {
		signal.Stop(t.winch)
		_ = ioctl(0, syscall.TCSETS, unsafe.Pointer(t.saved))
		t.saved = nil
	}
}

func termSize() (rows, cols uint16) {
	var ws struct{ Row, Col, X, Y uint16 }
	if ioctl(1, syscall.TIOCGWINSZ, unsafe.Pointer(&ws)) != nil || ws.Row == 0 || ws.Col == 0 {
		return 24, 80
	}
	return ws.Row, ws.Col
}

// CallTerm sends req on the connection fd with this process's stdio,
// in raw mode with a PTY when stdin and stdout are terminals (unless req
// ends the session), forwards signals and window changes until the reply,
// and returns the command's exit code. It closes fd.
func CallTerm(fd int, req Request) int {
	t := &terminal{}
	if !req.End && isTerminal(0) && isTerminal(1) {
		if saved, err := makeRaw(0); err == nil {
			t.saved = saved
			t.winch = make(chan os.Signal, 1)
			signal.Notify(t.winch, syscall.SIGWINCH)
			req.TTY = true
			req.Rows, req.Cols = termSize()
		}
	}
	defer t.restore()
	return call(fd, req, t)
}

func call(fd int, req Request, t *terminal) int {
	defer syscall.Close(fd)
	fail := func(err error) int {
		t.restore()
		os.Stderr.WriteString("airlock run: session: " + err.Error() + "\n")
		return exitAirlock
	}
	body := req.appendJSON(nil)
	msg := appendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
	msg = append(msg, body...)
	if err := syscall.Sendmsg(fd, msg, syscall.UnixRights(0, 1, 2), nil, 0); err != nil {
		return fail(wrap("send command", err))
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	go forward(fd, sigs, t.winch)
	rep, err := readReply(fd)
	if err != nil {
		return fail(wrap("no reply (the session ended?)", err))
	}
	if rep.Error != "" {
		t.restore()
		os.Stderr.WriteString("airlock run: " + rep.Error + "\n")
	}
	return rep.Code
}

// forward sends signals and window changes as control frames until a
// write fails (the connection closed).
func forward(fd int, sigs, winch chan os.Signal) {
	for {
		var v uint32
		typ := byte(CtlSignal)
		select {
		case s := <-sigs:
			v = uint32(s.(syscall.Signal))
		case <-winch:
			rows, cols := termSize()
			typ, v = CtlResize, uint32(rows)<<16|uint32(cols)
		}
		if _, err := syscall.Write(fd, appendUint32([]byte{typ}, v)); err != nil {
			return
		}
	}
}

// readReply reads the daemon's one line (at most 64 KiB).
func readReply(fd int) (Reply, error) {
	buf := make([]byte, 0, 512)
	tmp := make([]byte, 512)
	for len(buf) < 64<<10 && (len(buf) == 0 || buf[len(buf)-1] != '\n') {
		n, err := syscall.Read(fd, tmp)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return Reply{}, err
		}
		if n == 0 {
			break
		}
		buf = append(buf, tmp[:n]...)
	}
	return ParseReply(string(buf))
}

// FormatReply is the reply's line: the code, a space, the error quoted
// (strconv.Quote), a newline. Not JSON: encoding/json initialises late.
func FormatReply(r Reply) []byte {
	return []byte(strconv.Itoa(r.Code) + " " + strconv.Quote(r.Error) + "\n")
}

// ParseReply reads FormatReply's line.
func ParseReply(line string) (Reply, error) {
	line = trimNewline(line)
	sp := 0
	for sp < len(line) && line[sp] != ' ' {
		sp++
	}
	if sp == len(line) {
		return Reply{}, errors.New("malformed reply " + strconv.Quote(line))
	}
	code, quoted := line[:sp], line[sp+1:]
	n, err := strconv.Atoi(code)
	if err != nil {
		return Reply{}, errors.New("malformed reply " + strconv.Quote(line))
	}
	msg, err := strconv.Unquote(quoted)
	if err != nil {
		return Reply{}, errors.New("malformed reply " + strconv.Quote(line))
	}
	return Reply{Code: n, Error: msg}, nil
}

// appendJSON appends the request as JSON, as encoding/json would write it
// (invalid UTF-8 becomes U+FFFD), without encoding/json (it initialises
// late).
func (r Request) appendJSON(b []byte) []byte {
	b = append(b, '{')
	sep := func() {
		if len(b) > 1 {
			b = append(b, ',')
		}
	}
	if len(r.Args) > 0 {
		b = append(b, `"args":[`...)
		for i, a := range r.Args {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, a)
		}
		b = append(b, ']')
	}
	if r.TTY {
		sep()
		b = append(b, `"tty":true`...)
	}
	if r.Rows != 0 {
		sep()
		b = strconv.AppendUint(append(b, `"rows":`...), uint64(r.Rows), 10)
	}
	if r.Cols != 0 {
		sep()
		b = strconv.AppendUint(append(b, `"cols":`...), uint64(r.Cols), 10)
	}
	if r.End {
		sep()
		b = append(b, `"end":true`...)
	}
	return append(b, '}')
}

func appendJSONString(b []byte, s string) []byte {
	const hexdig = "0123456789abcdef"
	b = append(b, '"')
	for _, c := range s { // invalid UTF-8 ranges as U+FFFD
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', byte(c))
		case c < 0x20 || c == 0x2028 || c == 0x2029:
			b = append(b, '\\', 'u')
			for shift := 12; shift >= 0; shift -= 4 {
				b = append(b, hexdig[(c>>shift)&0xf])
			}
		default:
			b = utf8.AppendRune(b, c)
		}
	}
	return append(b, '"')
}

func trimNewline(s string) string {
	if s != "" && s[len(s)-1] == '\n' {
		return s[:len(s)-1]
	}
	return s
}

// wrapped is fmt.Errorf's "%s: %w" without fmt (see the package doc).
type wrapped struct {
	msg string
	err error
}

func wrap(msg string, err error) error { return &wrapped{msg, err} }
func (w *wrapped) Error() string       { return w.msg + ": " + w.err.Error() }
func (w *wrapped) Unwrap() error       { return w.err }

// appendUint32 appends v big-endian (without encoding/binary).
func appendUint32(b []byte, v uint32) []byte {
	return append(b, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}
