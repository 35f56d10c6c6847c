package sandbox

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestCheckMetadata(t *testing.T) {
	many := map[string]string{}
	for i := range MaxMetadataEntries + 1 {
		many["k"+strconv.Itoa(i)] = ""
	}
	for name, c := range map[string]struct {
		m  map[string]string
		ok bool
	}{
		"none":              {nil, true},
		"plain":             {map[string]string{"author": "mish", "purpose": "upload"}, true},
		"token chars":       {map[string]string{"a!#$%&'*+-.^_`|~Z9": "v"}, true},
		"empty value":       {map[string]string{"k": ""}, true},
		"longest key":       {map[string]string{strings.Repeat("k", MaxMetadataKey): "v"}, true},
		"key too long":      {map[string]string{strings.Repeat("k", MaxMetadataKey+1): "v"}, false},
		"empty key":         {map[string]string{"": "v"}, false},
		"space in key":      {map[string]string{"bad key": "v"}, false},
		"newline in key":    {map[string]string{"key\n": "v"}, false},
		"slash in key":      {map[string]string{"a/b": "v"}, false},
		"colon in key":      {map[string]string{"security:capability": "v"}, false},
		"NUL in key":        {map[string]string{"a\x00b": "v"}, false},
		"non-ASCII key":     {map[string]string{"é": "v"}, false},
		"newline in value":  {map[string]string{"good": "value\n"}, false},
		"NUL in value":      {map[string]string{"good": "a\x00"}, false},
		"non-ASCII value":   {map[string]string{"good": "é"}, false},
		"at the size bound": {map[string]string{"k": strings.Repeat("v", MaxMetadataBytes-len(MetadataXattrPrefix)-1)}, true},
		"over the size":     {map[string]string{"k": strings.Repeat("v", MaxMetadataBytes-len(MetadataXattrPrefix))}, false},
		"too many keys":     {many, false},
	} {
		err := CheckMetadata(c.m)
		if (err == nil) != c.ok {
			t.Errorf("%s: CheckMetadata = %v, want ok=%v", name, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v is not ErrInvalid", name, err)
		}
	}
}

func FuzzCheckMetadata(f *testing.F) {
	f.Add("author", "mish")
	f.Add("security.capability", "\x01\x00")
	f.Fuzz(func(t *testing.T, k, v string) {
		if CheckMetadata(map[string]string{k: v}) != nil {
			return
		}
		// What passes can only name an attribute under the prefix: no
		// separator or byte that could end the name or start another.
		if strings.ContainsAny(k, "\x00/: \n") || len(MetadataXattrPrefix+k) > 255 {
			t.Fatalf("key %q accepted", k)
		}
		for i := 0; i < len(v); i++ {
			if v[i] < 0x20 || v[i] > 0x7e {
				t.Fatalf("value %q accepted", v)
			}
		}
	})
}
