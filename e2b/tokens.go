package e2b

import (
	"sync"

	"github.com/airlock-dev/airlock/api"
)

// sandboxInfo is what the adapter remembers of a sandbox it handed out or
// saw an authenticated request for, so that requests E2B sends without
// credentials (public ports, the code interpreter's context calls) and
// host rewriting can be served: its sandbox access token and its port
// settings. It is a cache: after a restart the first authenticated
// request (create, connect, getInfo or any envd call) fills it again.
type sandboxInfo struct {
	token    string // the sandbox-scope access token
	private  bool   // ports need the traffic token
	maskHost string // maskRequestHost
	user     string // the default user of envd calls
}

// maxRemembered bounds the cache; beyond it, it starts over.
const maxRemembered = 16384

type infoCache struct {
	mu sync.Mutex
	m  map[string]sandboxInfo
}

func (c *infoCache) put(id string, si sandboxInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxRemembered {
		c.m = map[string]sandboxInfo{}
	}
	c.m[id] = si
}

func (c *infoCache) get(id string) (sandboxInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	si, ok := c.m[id]
	return si, ok
}

// remember records sb's token and port settings.
func (h *Handler) remember(sb *api.Sandbox, token string) {
	h.known.put(sb.ID, sandboxInfo{token: token, private: sb.Labels[labelPrivate] == "true", maskHost: sb.Labels[labelMaskHost], user: userOf(sb)})
}

// killSet counts the kills in flight per sandbox.
type killSet struct {
	mu sync.Mutex
	m  map[string]int
}

func (k *killSet) add(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[string]int{}
	}
	k.m[id]++
}

func (k *killSet) remove(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m[id]--; k.m[id] <= 0 {
		delete(k.m, id)
	}
}

func (k *killSet) has(id string) bool {
	if k == nil {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.m[id] > 0
}
