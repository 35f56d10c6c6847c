package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/airlock-dev/airlock/server/admission"
	"slices"
	"time"

	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// Image pools (issue 23): warm sandboxes of one image (an E2B template)
// made from one kind of inline policy, so that a create naming an image is
// served as fast as a profile pool's. What differs per create is applied
// at hand-out: labels, env, timeout, tenant and lease are the record's
// (as for any pooled sandbox), and the network's mode and hosts are set on
// the sandbox's own egress proxy. A pooled sandbox of a policy with a
// network is made deny-all (mode allowlist, nothing allowed), so until
// hand-out it reaches nothing; the rest of its policy must equal, field by
// field, what the request resolves to, else the create is made cold.

// imagePool is what an image pool adds to a pool. Set before the pool
// starts and then read-only, but for used (under pool.mu).
type imagePool struct {
	name    string             // store image reference ("" for a profile pool)
	raw     *policy.Policy     // the inline policy its sandboxes are made from
	asked   *policy.Policy     // what the first create asked itself (ceiling clamps)
	ceil    *admission.Ceiling // the ceiling they are made within (nil: trusted)
	tenant  string             // whose create started it ("" for --pool-template)
	demand  bool               // started by a create, not configured
	proxied bool               // the network's mode and hosts are set at hand-out
	used    time.Time          // last take
}

// poolShape is the pool side of raw (a create's inline policy after the
// ceiling's defaults): with a network through the proxy, that network
// made deny-all; and the key part naming it.
func poolShape(raw *policy.Policy) (pr *policy.Policy, proxied bool, shape string) {
	if raw == nil {
		return nil, false, ""
	}
	pr = raw.Clone()
	switch raw.Network.Mode {
	case policy.NetworkAllowlist, policy.NetworkOpen:
		pr.Network.Mode, pr.Network.Allow, pr.Network.Deny = policy.NetworkAllowlist, nil, nil
		proxied = true
	}
	b, err := json.Marshal(pr)
	if err != nil {
		return pr, proxied, "unencodable" // the field-by-field check at hand-out still decides
	}
	sum := sha256.Sum256(b)
	return pr, proxied, hex.EncodeToString(sum[:12])
}

// imagePoolable: a create an image pool may serve (a store image, no
// volumes: those are mounted per sandbox at creation).
func (s *Server) imagePoolable(plan *createPlan) bool {
	return plan.image != "" && plan.dockerImage == "" && len(plan.req.Volumes) == 0 && s.cfg.Images != nil
}

func imagePoolKey(plan *createPlan, profile string) poolKey {
	_, _, shape := poolShape(plan.raw)
	return poolKey{backend: plan.backend.Name(), profile: profile, image: plan.image, shape: shape}
}

// templatePool makes p (a --pool-template pool) one of image name for
// the creates of E2B's door by tenants under the default ceiling: an
// inline policy naming only a network.
func (s *Server) templatePool(p *pool, name string) error {
	if s.cfg.Images == nil {
		return fmt.Errorf("warm pool of template %q: this server has no image store: %w", name, sandbox.ErrInvalid)
	}
	if _, err := s.cfg.Images.Inspect(s.ctx, name); err != nil {
		return fmt.Errorf("warm pool of template %q: %w", name, err)
	}
	raw, err := s.cfg.Policies.ParseRaw([]byte(`{"version":1,"network":{"mode":"allowlist"}}`))
	if err != nil {
		return fmt.Errorf("warm pool of template %q: %w", name, err)
	}
	ceil, asked := &s.cfg.Ceilings.Default, raw
	if ceil.HasDefaults() {
		raw = ceil.WithDefaults(raw)
	}
	pr, proxied, shape := poolShape(raw)
	p.key.image, p.key.shape = name, shape
	p.img = imagePool{name: name, raw: pr, asked: asked, ceil: ceil, proxied: proxied, used: time.Now()}
	return nil
}

// makeImage creates one sandbox for an image pool. On error nothing is left.
func (p *pool) makeImage(id string) (*live, []byte, *policy.Policy, error) {
	s := p.s
	root, err := s.cfg.Images.Acquire(s.ctx, p.img.name, id, images.AcquireOptions{})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("create sandbox: %w", err)
	}
	pol, ws, err := s.resolve(id, p.backend, p.key.profile, p.img.raw, root)
	if err == nil {
		err = p.img.ceil.Fit(p.img.tenant, p.img.asked, pol)
	}
	if err != nil {
		root.Release()
		return nil, nil, nil, err
	}
	l, polJSON, err := s.coldCreate(s.ctx, id, p.backend, p.key.profile, pol, ws, root, "", nil)
	if err != nil {
		root.Release()
		return nil, nil, nil, err
	}
	return l, polJSON, pol, nil
}

// fromImagePool hands out a warm sandbox for plan when one of its kind is
// ready; nil and no error when none is (the caller creates one). The
// tenant is charged (quota) only here, at hand-out.
func (s *Server) fromImagePool(ctx context.Context, c caller, plan *createPlan, profile string) (*live, []byte, func(), error) {
	if !s.imagePoolable(plan) {
		return nil, nil, nil, nil
	}
	s.mu.Lock()
	pl := s.pools[imagePoolKey(plan, profile)]
	s.mu.Unlock()
	if pl == nil {
		return nil, nil, nil, nil
	}
	im, err := s.cfg.Images.Inspect(ctx, plan.image)
	if err != nil {
		return nil, nil, nil, nil // the cold create says what is wrong
	}
	it, ok := pl.take(im.ID)
	if !ok {
		return nil, nil, nil, nil
	}
	// The request's own policy, resolved for this sandbox and fitted to the
	// caller's ceiling: it must be the pooled one but for the network.
	pol, _, err := s.resolve(it.l.sb.ID(), plan.backend, profile, plan.raw, it.l.image)
	if err == nil {
		err = plan.ceil.Fit(c.tenant, plan.asked, pol)
	}
	if err != nil || !interchangeable(it.pol, pol, pl.img.proxied) {
		pl.giveBack(it)
		return nil, nil, nil, nil
	}
	release, err := s.reserve(ctx, c.tenant, plan.backend.Name(), s.chargeOf(pol), "")
	if err != nil {
		pl.giveBack(it)
		return nil, nil, nil, err
	}
	if pl.img.proxied {
		if err := s.cfg.applyNetwork(it.l, pol.Network); err != nil {
			// Fail closed: never handed out with another network than asked.
			release()
			s.log.Error("warm pool: network at hand-out; sandbox destroyed", "sandbox", it.l.sb.ID(), "err", err)
			go s.destroy(it.l, "network policy could not be applied at hand-out")
			return nil, nil, nil, nil
		}
	}
	polJSON, err := json.Marshal(pol.SandboxView())
	if err != nil {
		release()
		go s.destroy(it.l, "policy could not be encoded at hand-out")
		return nil, nil, nil, fmt.Errorf("create sandbox: encode policy: %w", err)
	}
	return it.l, polJSON, release, nil
}

// interchangeable: a sandbox made with pooled serves a create that
// resolved to asked. With proxied, the network's mode and hosts are set
// at hand-out (and asked must have a network through the proxy).
func interchangeable(pooled, asked *policy.Policy, proxied bool) bool {
	a, b := *pooled, *asked
	if proxied {
		if b.Network.Mode != policy.NetworkAllowlist && b.Network.Mode != policy.NetworkOpen {
			return false
		}
		a.Network.Mode, a.Network.Allow, a.Network.Deny = "", nil, nil
		b.Network.Mode, b.Network.Allow, b.Network.Deny = "", nil, nil
	}
	// Every exported field, in JSON (the unexported one is where the
	// policy was read from, not what it does).
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	return erra == nil && errb == nil && bytes.Equal(ja, jb)
}

// setNetwork is Config.applyNetwork's default: the sandbox's proxy takes
// n's mode and hosts (its request rules, budgets and bounds were checked
// equal), and is read back.
func setNetwork(l *live, n policy.Network) error {
	if l.proxy == nil {
		return fmt.Errorf("set network of %q: no egress proxy: %w", l.sb.ID(), sandbox.ErrUnavailable)
	}
	n.Bounds = nil // SetNetwork keeps the sandbox's own, equal to n's
	if err := l.proxy.SetNetwork(n); err != nil {
		return err
	}
	got := l.proxy.Network()
	if got.Mode != n.Mode || !slices.Equal(got.Allow, n.Allow) || !slices.Equal(got.Deny, n.Deny) {
		return fmt.Errorf("set network of %q: the proxy holds mode %q after the change: %w", l.sb.ID(), got.Mode, sandbox.ErrUnavailable)
	}
	return nil
}

// giveBack returns a sandbox taken but not handed out (it ran nothing).
func (p *pool) giveBack(it pooled) {
	it.out = make(chan struct{})
	p.mu.Lock()
	if p.closed || len(p.ready) >= p.size {
		p.mu.Unlock()
		go p.s.destroy(it.l, "pool closed or full")
		return
	}
	p.ready = append([]pooled{it}, p.ready...)
	p.mu.Unlock()
	p.s.wg.Add(1)
	go p.watch(it)
}

// noteDemand starts an image pool for plan's kind of create (after a cold
// one), within PoolMax in all and PoolTenantMax for the caller. Its
// sandboxes are charged to nobody until handed out.
func (s *Server) noteDemand(c caller, plan *createPlan, profile string) {
	if s.cfg.PoolDemand <= 0 || !s.imagePoolable(plan) || s.ctx.Err() != nil {
		return
	}
	key := imagePoolKey(plan, profile)
	pr, proxied, _ := poolShape(plan.raw)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pools[key] != nil {
		return
	}
	total, mine := 0, 0
	for _, p := range s.pools {
		if p.img.demand {
			total += p.size
			if p.img.tenant == c.tenant {
				mine += p.size
			}
		}
	}
	size := min(s.cfg.PoolDemand, s.cfg.PoolMax-total, s.cfg.PoolTenantMax-mine)
	if size <= 0 {
		return
	}
	p := newPool(s, key, size, plan.backend)
	var asked *policy.Policy
	if plan.asked != nil {
		asked = plan.asked.Clone()
	}
	p.img = imagePool{name: plan.image, raw: pr, asked: asked, ceil: plan.ceil, tenant: c.tenant,
		demand: true, proxied: proxied, used: time.Now()}
	s.pools[key] = p
	p.start()
	s.log.Info("warm pool started on demand", "image", plan.image, "backend", key.backend, "profile", profile, "size", size, "tenant", c.tenant)
}

// sweepPools retires demand pools not taken from for PoolIdle or whose
// image is gone, and drops ready sandboxes whose image name now stands
// for another image (replaced) or none (removed): a pool never hands out
// a stale image, nor holds a removed one in the store.
func (s *Server) sweepPools(now time.Time) {
	s.mu.Lock()
	var ps []*pool
	for _, p := range s.pools {
		if p.img.name != "" {
			ps = append(ps, p)
		}
	}
	s.mu.Unlock()
	for _, p := range ps {
		p.mu.Lock()
		idle := now.Sub(p.img.used) > s.cfg.PoolIdle
		p.mu.Unlock()
		im, err := s.cfg.Images.Inspect(s.ctx, p.img.name)
		gone := errors.Is(err, errdefs.ErrNotFound)
		switch {
		case p.img.demand && (idle || gone):
			s.retirePool(p, "warm pool retired (idle, or its image removed)")
		case gone:
			p.dropStale("")
		case err == nil:
			p.dropStale(im.ID)
		}
	}
}

// dropStale destroys the ready sandboxes not of image id ("": all).
func (p *pool) dropStale(id string) {
	p.mu.Lock()
	var gone []*live
	keep := p.ready[:0]
	for _, it := range p.ready {
		if id != "" && it.l.image != nil && it.l.image.Image.ID == id {
			keep = append(keep, it)
			continue
		}
		close(it.out)
		gone = append(gone, it.l)
	}
	p.ready = keep
	p.mu.Unlock()
	for _, l := range gone {
		go p.s.destroy(l, "pooled sandbox of a replaced or removed image")
	}
	if len(gone) > 0 {
		p.wake()
	}
}

// retirePool removes p from the server and destroys its sandboxes (in
// the background). Once.
func (s *Server) retirePool(p *pool, why string) {
	for _, l := range s.unlinkPool(p, why) {
		go s.destroy(l, why)
	}
}

// unlinkPool removes p from the server and returns its ready sandboxes
// for the caller to destroy (nil when p was retired already).
func (s *Server) unlinkPool(p *pool, why string) []*live {
	s.mu.Lock()
	if s.pools[p.key] != p {
		s.mu.Unlock()
		return nil
	}
	delete(s.pools, p.key)
	s.mu.Unlock()
	close(p.stop)
	s.log.Info(why, "image", p.img.name, "backend", p.key.backend, "profile", p.key.profile)
	return p.drain()
}

// retireDemandPools retires every image pool the server started on
// demand and returns once their sandboxes are gone, image leases
// included: an image prune must not count a warm sandbox nobody asked
// for as a use of its image. Pools the operator named (--pool-template)
// stay, like any sandbox, and keep their images.
func (s *Server) retireDemandPools(why string) {
	s.mu.Lock()
	var ps []*pool
	for _, p := range s.pools {
		if p.img.name != "" && p.img.demand {
			ps = append(ps, p)
		}
	}
	s.mu.Unlock()
	for _, p := range ps {
		for _, l := range s.unlinkPool(p, why) {
			s.destroy(l, why)
		}
		<-p.filled // a sandbox the filler was making is destroyed by add
	}
}
