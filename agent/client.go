package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/sandbox"
)

// Client is the host side of one agent session. All methods are safe for
// concurrent use. Once the session is gone (Close, the agent died, or it
// broke the protocol) every call fails with an error wrapping
// sandbox.ErrClosed and Done is closed.
type Client struct {
	sess   *yamux.Session
	opts   ClientOptions
	log    *slog.Logger
	audit  audit.Sink
	ctx    context.Context // ends with the client; given to egress handlers
	cancel context.CancelFunc
	egress chan struct{} // semaphore for concurrent egress streams

	mu      sync.Mutex
	cfg     GuestConfig
	failErr error // why the host ended the session, if it did
	closed  bool
	// stopPrograms ends following the egress handler's program rules
	// (watchPrograms); a no-op once called.
	stopPrograms func()
}

// NewClient starts the host (yamux client) side of a session over conn.
// It does not talk to the guest yet: call Hello first. The Client owns conn
// and closes it on Close or when the session fails. conn should be
// pollable (a net.Conn, e.g. from net.FileConn on a socketpair) so that
// closing it interrupts a pending read.
func NewClient(conn io.ReadWriteCloser, opts ClientOptions) (*Client, error) {
	if conn == nil {
		return nil, fmt.Errorf("agent client: nil connection: %w", sandbox.ErrInvalid)
	}
	log := discardLogger(opts.Log).With("component", "agent-client", "sandbox", opts.SandboxID)
	// The backlog bounds both unacknowledged streams we open and egress
	// streams the guest queues for us.
	sess, err := yamux.Client(conn, yamuxConfig(log, 64))
	if err != nil {
		return nil, fmt.Errorf("agent client: start session: %v: %w", err, sandbox.ErrInvalid)
	}
	n := opts.MaxEgressStreams
	if n <= 0 {
		n = 64
	}
	c := &Client{
		sess:   sess,
		opts:   opts,
		log:    log,
		audit:  opts.Audit,
		egress: make(chan struct{}, n),
	}
	if c.audit == nil {
		c.audit = audit.Discard
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	go c.acceptLoop()
	go func() {
		<-sess.CloseChan()
		c.cancel()
		c.endWatch()
	}()
	return c, nil
}

// Hello sends the guest its configuration and checks the protocol version.
// It must be the first call; the guest runs no other operation before it
// and refuses a second Hello after it. Operations may be pipelined behind
// it (started while Hello is in flight, to save its round trip): the guest
// holds them until the configuration is applied, and they fail if it is
// not.
func (c *Client) Hello(ctx context.Context, cfg GuestConfig) error {
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("agent hello: %w", err)
	}
	c.watchPrograms(&cfg)
	// Pipelined execs take their default timeout from it.
	c.mu.Lock()
	c.cfg = cfg
	c.mu.Unlock()
	st, resp, err := c.roundTrip(ctx, "agent hello", &request{Op: opHello, Config: &cfg})
	if err != nil {
		return err
	}
	st.Close()
	if resp.Version != ProtocolVersion {
		return fmt.Errorf("agent hello: agent speaks protocol %d, want %d: %w", resp.Version, ProtocolVersion, sandbox.ErrUnavailable)
	}
	c.log.Debug("agent ready", "agent_pid", resp.PID)
	return nil
}

// Ping checks that the agent answers requests (not just that the byte
// stream is alive).
func (c *Client) Ping(ctx context.Context) error {
	st, _, err := c.roundTrip(ctx, "agent ping", &request{Op: opPing})
	if err != nil {
		return err
	}
	st.Close()
	return nil
}

// Done is closed when the session is gone (closed, agent died, protocol
// violation).
func (c *Client) Done() <-chan struct{} { return c.sess.CloseChan() }

// Close ends the session and closes the connection. Idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.sess.Close()
	return nil
}

// fail ends the session because the guest misbehaved. Fail closed: an
// agent that breaks the protocol is not talked to again.
func (c *Client) fail(err error) {
	c.mu.Lock()
	if c.failErr == nil {
		c.failErr = err
	}
	c.mu.Unlock()
	c.log.Warn("closing agent session", "err", err)
	c.cancel()
	c.sess.Close()
}

func (c *Client) defaultTimeout() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg.Timeout
}

// open starts a stream and writes req on it.
func (c *Client) open(ctx context.Context, op string, req *request) (*yamux.Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	st, err := c.openStream(ctx)
	if err != nil {
		return nil, c.wrapErr(ctx, op, err)
	}
	stop := bindContext(ctx, st)
	err = writeHeader(st, req, MaxRequestHeader)
	if !stop() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		st.Close()
		if errors.Is(err, sandbox.ErrLimit) {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		return nil, c.wrapErr(ctx, op, err)
	}
	return st, nil
}

// openStream opens a stream without outliving ctx: yamux's OpenStream has
// no context and blocks while too many streams are unacknowledged by the
// guest (until its open timeout ends the session).
func (c *Client) openStream(ctx context.Context) (*yamux.Stream, error) {
	if ctx.Done() == nil {
		// Nothing can cancel it: no goroutine per open.
		return c.sess.OpenStream()
	}
	type res struct {
		st  *yamux.Stream
		err error
	}
	ch := make(chan res, 1)
	go func() {
		st, err := c.sess.OpenStream()
		ch <- res{st, err}
	}()
	select {
	case r := <-ch:
		return r.st, r.err
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.st != nil {
				r.st.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// roundTrip opens a stream, sends req and reads the response header. On
// success the stream stays open for the caller (who must close it); a
// response carrying an error is returned as that error.
func (c *Client) roundTrip(ctx context.Context, op string, req *request) (*yamux.Stream, *response, error) {
	st, err := c.open(ctx, op, req)
	if err != nil {
		return nil, nil, err
	}
	stop := bindContext(ctx, st)
	var resp response
	err = readHeader(st, &resp, MaxResponseHeader)
	if !stop() && err == nil {
		// ctx ended as the answer came: the stream has a past deadline.
		err = ctx.Err()
	}
	if err != nil {
		st.Close()
		return nil, nil, c.wrapErr(ctx, op, err)
	}
	if resp.Error != nil {
		st.Close()
		return nil, nil, fmt.Errorf("%s: %w", op, fromWire(resp.Error))
	}
	return st, &resp, nil
}

// wrapErr maps a transport error to an error kind: the caller's context
// error when it ended, ErrClosed otherwise (the session or stream is gone, or
// the guest broke the protocol, which ends the session).
func (c *Client) wrapErr(ctx context.Context, op string, err error) error {
	if ctx != nil && ctx.Err() != nil {
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
	if errors.Is(err, errProtocol) || errors.Is(err, yamux.ErrRemoteGoAway) {
		// A guest that breaks the protocol or stops taking streams is not
		// talked to again.
		c.fail(err)
		return fmt.Errorf("%s: %v: %w", op, err, sandbox.ErrClosed)
	}
	if c.sess.IsClosed() || errors.Is(err, yamux.ErrSessionShutdown) {
		c.mu.Lock()
		why := c.failErr
		c.mu.Unlock()
		if why != nil {
			return fmt.Errorf("%s: agent session closed after %v: %w", op, why, sandbox.ErrClosed)
		}
		return fmt.Errorf("%s: agent session closed: %w", op, sandbox.ErrClosed)
	}
	return fmt.Errorf("%s: agent stream: %v: %w", op, err, sandbox.ErrClosed)
}

// bindContext makes blocked reads and writes on st return when ctx ends.
// The returned func detaches ctx again; it reports false when ctx already
// ended (the stream then has a past deadline and must not be used further).
func bindContext(ctx context.Context, st *yamux.Stream) func() bool {
	if ctx.Done() == nil {
		return func() bool { return true }
	}
	stop := context.AfterFunc(ctx, func() {
		st.SetDeadline(time.Unix(1, 0))
	})
	return stop
}

// acceptLoop serves streams the guest opens: only egress tunnels.
func (c *Client) acceptLoop() {
	for {
		st, err := c.sess.AcceptStream()
		if err != nil {
			return
		}
		select {
		case c.egress <- struct{}{}:
			go func() {
				defer func() { <-c.egress }()
				c.serveGuestStream(st)
			}()
		default:
			c.log.Warn("refusing egress stream: too many open")
			st.Close()
		}
	}
}

// guestHeaderTimeout bounds how long a guest-opened stream may take to send
// its header.
const guestHeaderTimeout = 10 * time.Second

func (c *Client) serveGuestStream(st *yamux.Stream) {
	defer st.Close()
	st.SetReadDeadline(time.Now().Add(guestHeaderTimeout))
	var req request
	if err := readHeader(st, &req, MaxResponseHeader); err != nil {
		c.log.Debug("bad guest stream", "err", err)
		return
	}
	st.SetReadDeadline(time.Time{})
	if req.Op != opEgress {
		c.log.Warn("refusing guest stream", "op", truncate(req.Op, 32))
		return
	}
	if c.opts.Egress == nil {
		c.log.Debug("refusing egress stream: no egress handler")
		return
	}
	peer := sandbox.EgressPeer{Program: truncate(req.Program, 4096), Unverified: truncate(req.Unverified, 512)}
	if peer.Program == "" && peer.Unverified == "" {
		peer.Unverified = "the agent did not identify the program"
	}
	c.opts.Egress.ServeEgress(sandbox.WithEgressPeer(c.ctx, peer), c.opts.SandboxID, st)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func (c *Client) emit(typ, msg string, fields map[string]any) {
	c.audit.Emit(audit.Event{Time: time.Now().UTC(), Sandbox: c.opts.SandboxID, Type: typ, Message: msg, Fields: fields})
}
