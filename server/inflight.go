package server

import (
	"fmt"
	"sync"

	"github.com/airlock-dev/airlock/sandbox"
)

// DefaultTenantRequests is the most requests one keyed tenant may have
// running at once (Config.TenantRequests): twice what its HTTP/1.1
// connections could carry (DefaultTCPLimits.PerTenant), far below what
// its HTTP/2 streams could (256 connections of 32 streams each).
const DefaultTenantRequests = 512

// inflight counts the requests each tenant has running, so that one
// tenant multiplexing many streams (or holding many connections) cannot
// take every handler of the server.
type inflight struct {
	mu   sync.Mutex
	n    map[string]int
	peak int // the most requests one tenant ever had running (tests)
}

// acquire counts a request of tenant in, within limit (≤0: none); call
// release when it ends. Over the limit it fails with ErrLimit.
func (f *inflight) acquire(tenant string, limit int) (release func(), err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if limit > 0 && f.n[tenant] >= limit {
		return nil, fmt.Errorf("tenant %q has %d requests running (limit %d per tenant): wait for some to end and retry: %w",
			tenant, f.n[tenant], limit, sandbox.ErrLimit)
	}
	if f.n == nil {
		f.n = map[string]int{}
	}
	f.n[tenant]++
	f.peak = max(f.peak, f.n[tenant])
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.n[tenant]--; f.n[tenant] <= 0 {
			delete(f.n, tenant)
		}
	}, nil
}

// maxPeak is the most requests one tenant had running at once.
func (f *inflight) maxPeak() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.peak
}
