package policy

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseByteSize(t *testing.T) {
	good := []struct {
		in   string
		want ByteSize
	}{
		{"0", 0}, {"1", 1}, {"512", 512}, {"100k", 100_000}, {"100K", 100_000}, {"100kB", 100_000},
		{"2G", 2_000_000_000}, {"2GB", 2_000_000_000}, {"512Mi", 512 << 20}, {"512MiB", 512 << 20},
		{"2Gi", 2 << 30}, {"1.5Gi", 3 << 29}, {"1Ti", 1 << 40}, {"7Ei", 7 << 60}, {"3B", 3},
		{" 4Ki ", 4096}, {"unlimited", Unlimited}, {"none", Unlimited},
	}
	for _, tt := range good {
		got, err := ParseByteSize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	bad := []string{"", "-1", "Gi", "1.2.3G", "12XB", "1Gix", "8Ei", "99999999999999999999", "0x10", "1e3", "1 G", "∞"}
	for _, in := range bad {
		if got, err := ParseByteSize(in); err == nil || !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseByteSize(%q) = %d, %v; want an ErrInvalid error", in, got, err)
		}
	}
}

func TestByteSizeString(t *testing.T) {
	for in, want := range map[ByteSize]string{0: "0", 1000: "1000", 1024: "1Ki", 2 << 30: "2Gi", 3 << 29: "1536Mi", Unlimited: "unlimited"} {
		if got := in.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int64(in), got, want)
		}
		if in > 0 {
			back, err := ParseByteSize(in.String())
			if err != nil || back != in {
				t.Errorf("round trip of %d: %d, %v", int64(in), back, err)
			}
		}
	}
}

func TestParseDuration(t *testing.T) {
	good := []struct {
		in   string
		want time.Duration
	}{
		{"0", 0}, {"30s", 30 * time.Second}, {"5m", 5 * time.Minute}, {"1h30m", 90 * time.Minute},
		{"250ms", 250 * time.Millisecond}, {"2d", 48 * time.Hour}, {"unlimited", Unlimited}, {"NONE", Unlimited},
	}
	for _, tt := range good {
		got, err := ParseDuration(tt.in)
		if err != nil || got.D() != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, got.D(), err, tt.want)
		}
	}
	for _, in := range []string{"", "30", "-5m", "soon", "5 m", "1hd", "d", "99999999999d"} {
		if got, err := ParseDuration(in); err == nil || !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseDuration(%q) = %v, %v; want an ErrInvalid error", in, got, err)
		}
	}
	for d, want := range map[Duration]string{Duration(4 * time.Hour): "4h", Duration(90 * time.Second): "1m30s", Duration(10 * time.Minute): "10m", 0: "0s"} {
		if got := d.String(); got != want {
			t.Errorf("String(%v) = %q, want %q", d.D(), got, want)
		}
	}
}

// A resolved policy written as JSON (the HTTP API does) is valid policy
// input again, and decodes back with encoding/json too.
func TestPolicyJSONRoundTrip(t *testing.T) {
	p, _ := Profile("coding-agent")
	p.Limits.Pids = Unlimited // no limit where the profile has one
	r, err := p.Resolve(testEnv())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"timeout":"8h"`) || !strings.Contains(string(b), `"memory":4294967296`) {
		t.Errorf("JSON = %s", b)
	}
	back, err := Parse("api.json", b)
	if err != nil {
		t.Fatalf("JSON of a resolved policy does not parse as a policy: %v\n%s", err, b)
	}
	r2, err := back.Resolve(testEnv())
	if err != nil {
		t.Fatal(err)
	}
	r.src, r2.src = nil, nil
	if !reflect.DeepEqual(r, r2) {
		t.Errorf("round trip differs:\n%+v\n%+v", r, r2)
	}
	var viaJSON Policy
	if err := json.Unmarshal(b, &viaJSON); err != nil || viaJSON.Limits.Timeout.D() != 8*time.Hour || viaJSON.Limits.Memory != 4<<30 {
		t.Errorf("json.Unmarshal: %v %+v", err, viaJSON.Limits)
	}
	var d Duration
	if err := json.Unmarshal([]byte("1500000000"), &d); err != nil || d.D() != 1500*time.Millisecond {
		t.Errorf("nanoseconds: %v %v", d, err)
	}
	if err := json.Unmarshal([]byte(`"-3s"`), &d); err == nil {
		t.Error("negative duration accepted")
	}
	var s ByteSize
	if err := json.Unmarshal([]byte(`"2Gi"`), &s); err != nil || s != 2<<30 {
		t.Errorf("size string: %v %v", s, err)
	}
	if err := json.Unmarshal([]byte(`-1`), &s); err == nil {
		t.Error("negative size accepted")
	}
}
