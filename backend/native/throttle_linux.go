package native

import "time"

// Denied calls cost the host a round trip each (the supervisor receives,
// answers and reports them). A sandbox looping on a denied call must not
// take a host core from its neighbours: beyond denialRate a second, each
// further denial is answered only after denialPause, so the caller (and
// only the sandbox making them) slows down. Mediated file calls are not
// throttled.
const (
	denialRate  = 2000
	denialPause = time.Millisecond
)

// denialThrottle is a token bucket; the supervisor's one goroutine uses it.
type denialThrottle struct {
	tokens float64
	last   time.Time
}

// pause reports how long to wait before answering the next denial.
func (t *denialThrottle) pause(now time.Time) time.Duration {
	if t.last.IsZero() {
		t.tokens, t.last = denialRate, now
	}
	t.tokens = min(denialRate, t.tokens+now.Sub(t.last).Seconds()*denialRate)
	t.last = now
	if t.tokens >= 1 {
		t.tokens--
		return 0
	}
	return denialPause
}
