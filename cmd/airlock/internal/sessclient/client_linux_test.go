package sessclient

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The request the client writes by hand is what encoding/json reads back
// in the daemon, for any arguments (quotes, control bytes, invalid UTF-8
// as encoding/json itself would write it).
func TestRequestJSON(t *testing.T) {
	for _, r := range []Request{
		{Args: []string{"sh", "-c", `echo "a\b" 'c'`, "tab\there", "\x00\x1f\u2028", "é", "bad\xffutf8", "<&>"}},
		{Args: []string{"x"}, TTY: true, Rows: 50, Cols: 200},
		{End: true},
		{},
	} {
		var got Request
		if err := json.Unmarshal(r.appendJSON(nil), &got); err != nil {
			t.Fatalf("%+v: %s: %v", r, r.appendJSON(nil), err)
		}
		std, _ := json.Marshal(r)
		var want Request
		_ = json.Unmarshal(std, &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("hand-written %s reads as %+v, encoding/json's %s as %+v", r.appendJSON(nil), got, std, want)
		}
	}
}

func TestReplyRoundTrip(t *testing.T) {
	for _, r := range []Reply{{0, ""}, {127, `exec "x": not found`}, {125, "line\nbreak \xff"}, {-1, " "}} {
		got, err := ParseReply(string(FormatReply(r)))
		if err != nil || got != r {
			t.Errorf("%+v came back as %+v, %v", r, got, err)
		}
	}
	for _, bad := range []string{"", "\n", "x \"\"\n", "0 unquoted\n", "0"} {
		if _, err := ParseReply(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
