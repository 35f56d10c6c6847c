package mcptools

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/sandbox"
)

// Tool errors say what to do next, per error kind, without HTTP details.
func TestExplain(t *testing.T) {
	cases := []struct {
		err  error
		hint string
		want []string
	}{
		{&client.Error{Status: 404, Code: "not_found", Message: `sandbox "sb-1": not found`}, "", []string{`sandbox "sb-1": not found`, "create_sandbox"}},
		{&client.Error{Status: 403, Code: "permission_denied", Message: "write /etc/x: read-only"}, hintWrite, []string{"policy forbids", "workdir"}},
		{&client.Error{Status: 429, Code: "limit_exceeded", Message: "quota"}, "", []string{"destroy_sandbox"}},
		{&client.Error{Status: 504, Code: "timeout", Message: "slow"}, "", []string{"timeout_seconds"}},
		{fmt.Errorf("sandbox_id is empty: %w", errMissing), "", []string{"sandbox_id is empty", "Fix the arguments"}},
		{fmt.Errorf("x: %w", errNotOurs), hintCommand, []string{"create_sandbox"}},
		{fmt.Errorf("boom"), "", []string{"retry once"}},
	}
	for _, c := range cases {
		got := explain("op", c.err, c.hint).Error()
		if strings.Contains(got, "(404") || strings.Contains(got, "(403") {
			t.Errorf("HTTP details leak into %q", got)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("explain(%v) = %q, want it to contain %q", c.err, got, w)
			}
		}
	}
	if !strings.Contains(explain("op", fmt.Errorf("x: %w", sandbox.ErrClosed), "").Error(), "create_sandbox") {
		t.Error("a closed sandbox must point at create_sandbox")
	}
}

// The descriptions state the network and limits the operator fixed.
func TestReach(t *testing.T) {
	none := (&tools{cfg: Config{Profile: "default", Timeout: time.Hour}}).reach()
	if !strings.Contains(none, "Network: none") || !strings.Contains(none, "2Gi") || !strings.Contains(none, "1h0m0s") {
		t.Errorf("default profile: %s", none)
	}
	allow := (&tools{cfg: Config{Profile: "default", Allow: []string{"pypi.org:443"}, Memory: "512Mi", Timeout: time.Minute}}).reach()
	if !strings.Contains(allow, "only pypi.org:443") || !strings.Contains(allow, "512Mi") {
		t.Errorf("allow-list: %s", allow)
	}
}
