package server

import (
	"fmt"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// poolKey is what makes two creates interchangeable: backend, profile,
// and for image pools the image's name and the shape of the inline
// policy (its JSON with the network's mode and hosts left out: those are
// set at hand-out, see imagepool.go).
type poolKey struct{ backend, profile, image, shape string }

// pool keeps ready sandboxes of one key. A pooled sandbox is fresh: it has
// never been handed out, and once taken it is never returned (destroyed
// after use like any other), so no state crosses tenants.
type pool struct {
	s       *Server
	key     poolKey
	size    int
	backend sandbox.Backend
	img     imagePool // image pools only
	stop    chan struct{}
	filled  chan struct{} // closed when the filler has returned (nothing half-made left)

	mu       sync.Mutex
	ready    []pooled
	mem      int64
	disk     int64 // each sandbox's disk charge (diskquota.go)
	memKnown bool
	pol      *policy.Policy // resolved policy of its sandboxes, once known
	kick     chan struct{}
	closed   bool
}

type pooled struct {
	l       *live
	polJSON []byte
	pol     *policy.Policy // its resolved policy
	out     chan struct{}  // closed when taken or drained
}

func (s *Server) startPool(pc PoolConfig) error {
	if pc.Backend == "" {
		pc.Backend = s.cfg.DefaultBackend
	}
	b, ok := s.cfg.Backends[pc.Backend]
	if !ok {
		return fmt.Errorf("warm pool %s/%s: unknown backend: %w", pc.Backend, pc.Profile, sandbox.ErrInvalid)
	}
	if pc.Profile == "" {
		pc.Profile = "default"
	}
	if pc.Size <= 0 {
		return nil
	}
	p := newPool(s, poolKey{backend: pc.Backend, profile: pc.Profile}, pc.Size, b)
	if pc.Image != "" {
		if err := s.templatePool(p, pc.Image); err != nil {
			return err
		}
	}
	s.mu.Lock()
	if s.pools[p.key] != nil {
		s.mu.Unlock()
		return fmt.Errorf("warm pool %s/%s: configured twice: %w", pc.Backend, pc.Profile, sandbox.ErrInvalid)
	}
	s.pools[p.key] = p
	s.mu.Unlock()
	p.start()
	return nil
}

func newPool(s *Server, key poolKey, size int, b sandbox.Backend) *pool {
	return &pool{s: s, key: key, size: size, backend: b, kick: make(chan struct{}, 1), stop: make(chan struct{}), filled: make(chan struct{})}
}

// start runs the pool's filler; the caller registered it in s.pools.
func (p *pool) start() {
	p.s.wg.Add(1)
	go p.fill()
	p.kick <- struct{}{}
}

// charge reports what one of this pool's sandboxes counts against a
// tenant's quota, once known.
func (p *pool) charge() (charge, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return charge{memory: p.mem, disk: p.disk}, p.memKnown && len(p.ready) > 0
}

// fits reports whether this pool's sandboxes pass check (a tenant's
// ceiling); false while none was made yet.
func (p *pool) fits(check func(*policy.Policy) error) bool {
	p.mu.Lock()
	pol := p.pol
	p.mu.Unlock()
	return pol != nil && check(pol) == nil
}

// take removes and returns one ready sandbox, or false. Under p.mu, so no
// sandbox is ever handed out twice. imageID, for an image pool, is the
// image its name stands for now: a sandbox of another (a replaced image)
// is destroyed, never handed out.
func (p *pool) take(imageID string) (pooled, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.wake()
	p.img.used = time.Now()
	for len(p.ready) > 0 {
		it := p.ready[0]
		p.ready = p.ready[1:]
		close(it.out)
		select {
		case <-it.l.sb.Done():
			go p.s.destroy(it.l, "pooled sandbox ended")
			continue
		default:
		}
		if p.img.name != "" && (it.l.image == nil || it.l.image.Image.ID != imageID) {
			go p.s.destroy(it.l, "pooled sandbox of a replaced image")
			continue
		}
		return it, true
	}
	return pooled{}, false
}

// wake asks the filler to top the pool up.
func (p *pool) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// drain removes every ready sandbox (at shutdown); the caller destroys them.
func (p *pool) drain() []*live {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	out := make([]*live, 0, len(p.ready))
	for _, it := range p.ready {
		close(it.out)
		out = append(out, it.l)
	}
	p.ready = nil
	return out
}

func (p *pool) fill() {
	defer p.s.wg.Done()
	defer close(p.filled)
	backoff := 100 * time.Millisecond
	for {
		select {
		case <-p.s.ctx.Done():
			return
		case <-p.stop:
			return
		case <-p.kick:
		}
		for {
			p.mu.Lock()
			need := !p.closed && len(p.ready) < p.size
			p.mu.Unlock()
			if !need || p.s.ctx.Err() != nil {
				break
			}
			if err := p.addOne(); err != nil {
				p.s.log.Error("warm pool: create", "backend", p.key.backend, "profile", p.key.profile, "err", err)
				select {
				case <-p.s.ctx.Done():
					return
				case <-p.stop:
					return
				case <-time.After(backoff):
				}
				backoff = min(backoff*2, 30*time.Second)
				continue
			}
			backoff = 100 * time.Millisecond
		}
	}
}

func (p *pool) addOne() error {
	id := newID("sb-")
	if p.img.name != "" {
		l, polJSON, pol, err := p.makeImage(id)
		if err != nil {
			return err
		}
		return p.add(l, polJSON, pol)
	}
	var raw *policy.Policy
	if d := &p.s.cfg.Ceilings.Default; d.HasDefaults() {
		raw = d.WithDefaults(nil)
	}
	pol, ws, err := p.s.resolve(id, p.backend, p.key.profile, raw, nil)
	if err != nil {
		return err
	}
	p.s.cfg.Ceilings.Default.ClampUnset(raw, pol)
	p.s.cfg.Ceilings.Default.ClampOpenFiles(raw, pol)
	l, polJSON, err := p.s.coldCreate(p.s.ctx, id, p.backend, p.key.profile, pol, ws, nil, "", nil)
	if err != nil {
		return err
	}
	return p.add(l, polJSON, pol)
}

// add puts a new sandbox in the pool (destroys it if the pool closed).
func (p *pool) add(l *live, polJSON []byte, pol *policy.Policy) error {
	l.pooled = true
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.s.destroy(l, "pool closed")
		return nil
	}
	p.mem, p.disk, p.memKnown, p.pol = l.memory, l.diskUse, true, pol
	it := pooled{l, polJSON, pol, make(chan struct{})}
	p.ready = append(p.ready, it)
	p.mu.Unlock()
	p.s.wg.Add(1)
	go p.watch(it)
	return nil
}

// watch replaces a ready sandbox that dies while waiting in the pool.
func (p *pool) watch(it pooled) {
	defer p.s.wg.Done()
	select {
	case <-it.out:
		return
	case <-p.s.ctx.Done():
		return
	case <-it.l.sb.Done():
	}
	p.mu.Lock()
	found := false
	for i, r := range p.ready {
		if r.l == it.l {
			p.ready = append(p.ready[:i], p.ready[i+1:]...)
			close(it.out)
			found = true
			break
		}
	}
	p.mu.Unlock()
	if !found {
		return // taken or drained meanwhile: its new owner handles it
	}
	p.s.destroy(it.l, "pooled sandbox ended")
	p.wake()
}

// readyCount is for metrics.
func (p *pool) readyCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready)
}
