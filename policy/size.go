package policy

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Unlimited, in a parsed but unresolved policy, marks a limit explicitly
// removed ("unlimited", "none" or 0 in YAML) so that it overrides a
// profile's limit when layered. Resolve turns it into 0 (no limit).
const Unlimited = -1

// size suffixes: SI (k, M, G, T, P, E) are powers of 1000, binary (Ki, Mi,
// ...) powers of 1024, as in Kubernetes. Letters are case-insensitive and
// a trailing B is allowed ("512MiB", "2GB").
var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15, "e": 1e18,
	"ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30, "ti": 1 << 40, "pi": 1 << 50, "ei": 1 << 60,
}

// ParseByteSize parses a size: a non-negative integer number of bytes or a
// number with a unit suffix (100k, 2G, 512Mi, 1.5Gi, 64MiB). "unlimited" and
// "none" return Unlimited.
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	switch strings.ToLower(t) {
	case "unlimited", "none":
		return Unlimited, nil
	case "":
		return 0, invalidf("empty size")
	}
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(t[i:])
	if num == "" {
		return 0, invalidf("bad size %q: want a number with an optional unit (512Mi, 2G, 100k)", s)
	}
	if len(unit) > 1 && strings.HasSuffix(unit, "b") {
		unit = unit[:len(unit)-1]
	}
	mult, ok := sizeUnits[unit]
	if !ok {
		return 0, invalidf("bad size %q: unknown unit %q (use k, M, G, T or Ki, Mi, Gi, Ti)", s, t[i:])
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseUint(num, 10, 63)
		if err != nil {
			return 0, invalidf("bad size %q: number out of range", s)
		}
		m := uint64(mult)
		if n != 0 && n > math.MaxInt64/m {
			return 0, invalidf("bad size %q: too large", s)
		}
		return ByteSize(n * m), nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || strings.Count(num, ".") != 1 {
		return 0, invalidf("bad size %q: bad number", s)
	}
	v := f * mult
	if v >= math.MaxInt64 {
		return 0, invalidf("bad size %q: too large", s)
	}
	return ByteSize(v), nil
}

// String formats b with the largest binary unit that divides it exactly
// ("2Gi", "512Mi", "1000").
func (b ByteSize) String() string {
	if b == Unlimited {
		return "unlimited"
	}
	units := []struct {
		s string
		n int64
	}{{"Ei", 1 << 60}, {"Pi", 1 << 50}, {"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}}
	for _, u := range units {
		if b != 0 && int64(b)%u.n == 0 {
			return strconv.FormatInt(int64(b)/u.n, 10) + u.s
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

// UnmarshalYAML accepts a non-negative integer or a size string.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return invalidf("want a size (512Mi, 2G, 100k), got a %s", kindName(n))
	}
	if n.ShortTag() == "!!int" {
		v, err := strconv.ParseInt(n.Value, 0, 64)
		if err != nil {
			return invalidf("bad size %q: number out of range", n.Value)
		}
		if v < 0 {
			return invalidf("size must not be negative, got %d", v)
		}
		*b = ByteSize(v)
		return nil
	}
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// MarshalYAML writes sizes in their short form ("2Gi").
func (b ByteSize) MarshalYAML() (any, error) { return b.String(), nil }

// ParseDuration parses a non-negative Go duration ("30s", "5m", "1h30m"),
// "0", or days ("2d"). "unlimited" and "none" return Unlimited.
func ParseDuration(s string) (Duration, error) {
	t := strings.TrimSpace(s)
	switch strings.ToLower(t) {
	case "unlimited", "none":
		return Unlimited, nil
	case "0":
		return 0, nil
	case "":
		return 0, invalidf("empty duration")
	}
	if d, ok := strings.CutSuffix(t, "d"); ok && d != "" && !strings.ContainsAny(d, "hmsuµn") {
		n, err := strconv.ParseUint(d, 10, 16)
		if err != nil {
			return 0, invalidf("bad duration %q", s)
		}
		return Duration(time.Duration(n) * 24 * time.Hour), nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, invalidf("bad duration %q: want e.g. 30s, 5m, 2h", s)
	}
	if d < 0 {
		return 0, invalidf("duration must not be negative, got %q", s)
	}
	return Duration(d), nil
}

// String formats d compactly ("4h", "90s", "1h30m").
func (d Duration) String() string {
	if d == Unlimited {
		return "unlimited"
	}
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// UnmarshalYAML accepts a duration string; a bare integer is only accepted
// when it is 0 (other numbers need a unit).
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return invalidf("want a duration (30s, 5m, 2h), got a %s", kindName(n))
	}
	if n.ShortTag() == "!!int" && n.Value != "0" {
		return invalidf("duration %s needs a unit, e.g. %ss", n.Value, n.Value)
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalYAML writes durations as strings ("4h").
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "scalar"
	case yaml.AliasNode:
		return "alias"
	case yaml.DocumentNode:
		return "document"
	}
	return fmt.Sprintf("node kind %d", n.Kind)
}
