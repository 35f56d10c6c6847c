package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/sandbox"
)

// Bad code requests are 4xx answers that say what is wrong, before any
// interpreter starts; a missing interpreter is a 404 naming it. (Cells
// themselves run in real sandboxes in client/code_test.go.)
func TestCodeBadInput(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		code, lang string
		timeout    time.Duration
		kind       error
		says       string
	}{
		{"1", "cobol", 0, sandbox.ErrInvalid, `language "cobol": want python or javascript`},
		{"  \n", "", 0, sandbox.ErrInvalid, "code: empty"},
		{"1", "", 48 * time.Hour, sandbox.ErrInvalid, "longer than"},
		{"1", "", 0, sandbox.ErrNotFound, "python3 is not installed in this sandbox"},
	}
	for _, tc := range cases {
		_, err := c.RunCode(ctx, sb.ID, tc.code, client.CodeOptions{Language: tc.lang, Timeout: tc.timeout})
		if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%q/%q: got %v, want %v saying %q", tc.code, tc.lang, err, tc.kind, tc.says)
		}
	}
	if _, err := c.RunCode(ctx, "sb-nope", "1", client.CodeOptions{}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("missing sandbox: %v", err)
	}
	// Unknown fields are refused by name.
	resp, body := rawDo(t, ts, "POST", "/v1/sandboxes/"+sb.ID+"/code", "application/json", bytes.NewReader([]byte(`{"code":"1","lang":"python"}`)))
	var eb api.ErrorBody
	json.Unmarshal(body, &eb)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(eb.Error.Message, `"lang"`) {
		t.Errorf("unknown field: %d %+v", resp.StatusCode, eb)
	}
}
