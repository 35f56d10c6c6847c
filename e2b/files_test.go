package e2b

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// TestFileMetadataOf reads an upload's X-Metadata-* headers as envd's
// description says: prefix stripped, key lower-cased, the first value of
// a repeated header, bad keys and values and too much refused.
func TestFileMetadataOf(t *testing.T) {
	for name, c := range map[string]struct {
		h    http.Header
		want map[string]string
		ok   bool
	}{
		"none":          {http.Header{"Content-Type": {"x"}}, nil, true},
		"two":           {http.Header{"X-Metadata-Author": {"mish"}, "X-Metadata-Purpose": {"upload"}}, map[string]string{"author": "mish", "purpose": "upload"}, true},
		"first wins":    {http.Header{"X-Metadata-Tag": {"one", "two"}}, map[string]string{"tag": "one"}, true},
		"lower-cased":   {http.Header{"x-metadata-MiXeD": {"v"}}, map[string]string{"mixed": "v"}, true},
		"empty key":     {http.Header{"X-Metadata-": {"v"}}, nil, false},
		"control value": {http.Header{"X-Metadata-Good": {"bad\tvalue"}}, nil, false},
		"namespace":     {http.Header{"X-Metadata-Security.capability": {"x"}}, map[string]string{"security.capability": "x"}, true},
		"too large":     {http.Header{"X-Metadata-Big": {strings.Repeat("v", 4096)}}, nil, false},
		"key too long":  {http.Header{"X-Metadata-" + strings.Repeat("k", 247): {"v"}}, nil, false},
	} {
		got, err := fileMetadataOf(c.h)
		if (err == nil) != c.ok {
			t.Errorf("%s: err = %v, want ok=%v", name, err, c.ok)
			continue
		}
		if c.ok && !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %v, want %v", name, got, c.want)
		}
	}
}
