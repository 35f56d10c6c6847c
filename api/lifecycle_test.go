package api

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/errdefs"
)

// keep_alive takes its old boolean form and the object form; anything
// else is an invalid-argument error.
func TestKeepAliveForms(t *testing.T) {
	cases := []struct {
		in    string
		keep  bool
		while string
		idle  time.Duration
		bad   bool
	}{
		{in: `{}`},
		{in: `{"keep_alive": true}`, keep: true},
		{in: `{"keep_alive": false}`},
		{in: `{"keep_alive": null}`},
		{in: `{"keep_alive": {"while": "processes"}}`, while: "processes"},
		{in: `{"keep_alive": {"while": "processes", "idle": "30s"}}`, while: "processes", idle: 30 * time.Second},
		{in: `{"keep_alive": {"while": "forever"}}`, bad: true},
		{in: `{"keep_alive": {"while": "processes", "extra": 1}}`, bad: true},
		{in: `{"keep_alive": {"while": "processes", "idle": "-1s"}}`, bad: true},
		{in: `{"keep_alive": "yes"}`, bad: true},
		{in: `{"keep_alive": 1}`, bad: true},
		{in: `{"no_such_field": 1}`, bad: true},
	}
	for _, c := range cases {
		var r CreateSandboxRequest
		err := json.Unmarshal([]byte(c.in), &r)
		if c.bad {
			if err == nil {
				t.Errorf("%s: accepted: %+v", c.in, r)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		var while string
		var idle time.Duration
		if r.KeepAliveWhile != nil {
			while, idle = r.KeepAliveWhile.While, r.KeepAliveWhile.Idle.D()
		}
		if r.KeepAlive != c.keep || while != c.while || idle != c.idle {
			t.Errorf("%s: got keep %v while %q idle %s", c.in, r.KeepAlive, while, idle)
		}
		// Round trip: what the SDK sends is what the server reads.
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back CreateSandboxRequest
		if err := json.Unmarshal(b, &back); err != nil || back.KeepAlive != r.KeepAlive || (back.KeepAliveWhile == nil) != (r.KeepAliveWhile == nil) {
			t.Errorf("%s: round trip %s: %v %+v", c.in, b, err, back)
		}
	}
	var r CreateSandboxRequest
	if err := json.Unmarshal([]byte(`{"keep_alive": {"while": "x"}}`), &r); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("bad while: %v, want ErrInvalid", err)
	}
}
