package policy

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The decoder walks a yaml.Node tree into a Policy by reflection over the
// yaml tags, so that every error names the line and the dotted field path,
// unknown and repeated fields are errors, and types are strict (a list is
// never silently a string). It records the line of every field it sets so
// later checks (validation, Resolve) can point at the file too.

const (
	maxDepth = 32
	// maxNodes bounds the work for one document, aliases included (a small
	// file can otherwise expand into a huge one: "billion laughs").
	maxNodes = 1 << 16
)

type decoder struct {
	src   *source
	errs  []*Error
	nodes int
}

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	if len(d.errs) < maxErrors {
		d.errs = append(d.errs, &Error{File: d.src.file, Line: line, Field: path, Msg: fmt.Sprintf(format, args...)})
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

var unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()

// decode sets v (addressable) from n. limit is true inside limits:, where
// an explicit 0, "unlimited" or "none" becomes Unlimited.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string, depth int, limit bool) {
	d.nodes++
	if d.nodes > maxNodes {
		if d.nodes == maxNodes+1 {
			d.fail(n, path, "document too large or too many aliases (more than %d nodes)", maxNodes)
		}
		return
	}
	if depth > maxDepth {
		d.fail(n, path, "nested too deeply")
		return
	}
	if n = d.deref(n, path); n == nil {
		return
	}
	null := n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
	if v.CanAddr() && v.Addr().Type().Implements(unmarshalerType) {
		if !null {
			d.decodeUnmarshaler(n, v, path, limit)
		}
		return
	}
	switch k := v.Kind(); {
	case k == reflect.Struct:
		d.decodeStruct(n, v, path, depth)
	case k == reflect.Map:
		d.decodeMap(n, v, path, depth)
	case null:
		// A null leaves pointers, lists and scalars at their zero value.
	case k == reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		d.decode(n, p.Elem(), path, depth+1, limit)
		v.Set(p)
	case k == reflect.Slice:
		d.decodeSlice(n, v, path, depth)
	case k == reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.fail(n, path, "want a string, got %s", describe(n))
			return
		}
		v.SetString(n.Value)
	case k == reflect.Bool:
		d.decodeBool(n, v, path)
	case k == reflect.Int, k == reflect.Int64, k == reflect.Int32:
		d.decodeInt(n, v, path, limit)
	case k == reflect.Float64:
		d.decodeFloat(n, v, path, limit)
	default:
		d.fail(n, path, "internal: cannot decode into %s", v.Type())
	}
}

// decodeUnmarshaler decodes a type with its own UnmarshalYAML (sizes,
// durations); inside limits:, 0 and the unlimited words mean Unlimited.
func (d *decoder) decodeUnmarshaler(n *yaml.Node, v reflect.Value, path string, limit bool) {
	if limit && isUnlimitedWord(n) {
		v.SetInt(Unlimited)
		return
	}
	if err := v.Addr().Interface().(yaml.Unmarshaler).UnmarshalYAML(n); err != nil {
		d.fail(n, path, "%s", message(err))
		return
	}
	if limit && v.Int() == 0 {
		v.SetInt(Unlimited)
	}
}

func (d *decoder) decodeSlice(n *yaml.Node, v reflect.Value, path string, depth int) {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, path, "want a list, got %s", describe(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, c := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		d.src.set(p, c.Line)
		d.decode(c, s.Index(i), p, depth+1, false)
	}
	v.Set(s)
}

func (d *decoder) decodeBool(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		d.fail(n, path, "want true or false, got %s", describe(n))
		return
	}
	b, err := strconv.ParseBool(strings.ToLower(n.Value))
	if err != nil {
		d.fail(n, path, "want true or false, got %q", n.Value)
		return
	}
	v.SetBool(b)
}

// decodeInt: inside limits:, negative is refused and 0 or an unlimited
// word means Unlimited.
func (d *decoder) decodeInt(n *yaml.Node, v reflect.Value, path string, limit bool) {
	if limit && isUnlimitedWord(n) {
		v.SetInt(Unlimited)
		return
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		d.fail(n, path, "want an integer, got %s", describe(n))
		return
	}
	i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
	if err != nil || v.OverflowInt(i) {
		d.fail(n, path, "integer %s out of range", n.Value)
		return
	}
	if limit {
		if i < 0 {
			d.fail(n, path, "must not be negative, got %d", i)
			return
		}
		if i == 0 {
			i = Unlimited
		}
	}
	v.SetInt(i)
}

// decodeFloat: finite numbers only; limits as decodeInt.
func (d *decoder) decodeFloat(n *yaml.Node, v reflect.Value, path string, limit bool) {
	if limit && isUnlimitedWord(n) {
		v.SetFloat(Unlimited)
		return
	}
	tag := n.ShortTag()
	if n.Kind != yaml.ScalarNode || (tag != "!!int" && tag != "!!float") {
		d.fail(n, path, "want a number, got %s", describe(n))
		return
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		d.fail(n, path, "want a finite number, got %q", n.Value)
		return
	}
	if limit {
		if f < 0 {
			d.fail(n, path, "must not be negative, got %v", f)
			return
		}
		if f == 0 {
			f = Unlimited
		}
	}
	v.SetFloat(f)
}

// deref follows aliases (a bounded number of hops); nil after an error.
func (d *decoder) deref(n *yaml.Node, path string) *yaml.Node {
	for hops := 0; n.Kind == yaml.AliasNode; hops++ {
		if n.Alias == nil || hops > 8 {
			d.fail(n, path, "bad alias")
			return nil
		}
		n = n.Alias
		d.nodes++
	}
	return n
}

func isUnlimitedWord(n *yaml.Node) bool {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return false
	}
	w := strings.ToLower(strings.TrimSpace(n.Value))
	return w == "unlimited" || w == "none"
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "null"
		}
		return fmt.Sprintf("%q", n.Value)
	default:
		return "a " + kindName(n)
	}
}

// fieldsOf maps yaml names to struct field indexes.
func fieldsOf(t reflect.Type) (map[string]int, []string) {
	m := map[string]int{}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = i
		names = append(names, name)
	}
	return m, names
}

var limitsType = reflect.TypeOf(Limits{})

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string, depth int) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping, got %s", describe(n))
		return
	}
	fields, names := fieldsOf(v.Type())
	limit := v.Type() == limitsType
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.fail(k, path, "field names must be plain strings, got %s", describe(k))
			continue
		}
		p := join(path, k.Value)
		idx, ok := fields[k.Value]
		if !ok && k.ShortTag() == "!!merge" {
			d.fail(k, p, "YAML merge keys (<<) are not supported; repeat the fields or use an alias for a whole value")
			continue
		}
		if !ok {
			d.fail(k, p, "unknown field %q (known: %s)", k.Value, strings.Join(names, ", "))
			continue
		}
		if seen[k.Value] {
			d.fail(k, p, "set twice")
			continue
		}
		seen[k.Value] = true
		d.src.set(p, k.Line)
		d.decode(val, v.Field(idx), p, depth+1, limit)
	}
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string, depth int) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping, got %s", describe(n))
		return
	}
	if v.Type().Key().Kind() != reflect.String {
		d.fail(n, path, "internal: map key type %s", v.Type().Key())
		return
	}
	m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!null" {
			d.fail(k, path, "keys must be strings, got %s", describe(k))
			continue
		}
		p := join(path, k.Value)
		if m.MapIndex(reflect.ValueOf(k.Value)).IsValid() {
			d.fail(k, p, "set twice")
			continue
		}
		d.src.set(p, k.Line)
		e := reflect.New(v.Type().Elem()).Elem()
		if e.Kind() == reflect.String {
			// Map values are environment values: any scalar is its text.
			if val = d.deref(val, p); val == nil {
				continue
			}
			if val.Kind != yaml.ScalarNode {
				d.fail(val, p, "want a string, got %s", describe(val))
				continue
			}
			if val.ShortTag() != "!!null" {
				e.SetString(val.Value)
			}
		} else {
			d.decode(val, e, p, depth+1, false)
		}
		m.SetMapIndex(reflect.ValueOf(k.Value), e)
	}
	v.Set(m)
}

// source remembers where a policy came from: its file name and the line of
// each field path the file set.
type source struct {
	file  string
	lines map[string]int
	// raw maps a field path in a merged policy back to the path the file
	// wrote (list indexes shift when a file's lists append to a profile's).
	raw map[string]string
}

func (s *source) set(path string, line int) {
	if s != nil {
		s.lines[path] = line
	}
}

// locate returns the file, the line of path and path as the file wrote it. A path the file did not set has
// no file or line.
func (s *source) locate(path string) (file string, line int, field string) {
	if s == nil {
		return "", 0, path
	}
	// A field the file did not write is located at the list element that
	// holds it (a secret missing its name), never at an enclosing mapping
	// (a profile's entry is not the file's).
	for p := path; p != ""; p = parentPath(p) {
		if p != path && !strings.HasSuffix(p, "]") {
			break
		}
		if l, ok := s.lines[p]; ok {
			if r, ok := s.raw[path]; ok {
				path = r
			} else if r, ok := s.raw[p]; ok {
				path = r + strings.TrimPrefix(path, p)
			}
			return s.file, l, path
		}
	}
	return "", 0, path
}

func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndexByte(p, '['); i >= 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}

// shifted returns a copy of s where list indexes of the given top-level
// list paths are moved by off[path] (used when a file's lists are appended
// to a profile's).
func (s *source) shifted(off map[string]int) *source {
	if s == nil {
		return nil
	}
	out := &source{file: s.file, lines: make(map[string]int, len(s.lines)), raw: map[string]string{}}
	// Longest list path first so "secrets" does not shadow nothing longer.
	lists := make([]string, 0, len(off))
	for p := range off {
		lists = append(lists, p)
	}
	sort.Slice(lists, func(i, j int) bool { return len(lists[i]) > len(lists[j]) })
	for k, l := range s.lines {
		m := shiftIndex(k, lists, off)
		out.lines[m] = l
		r := k
		if rr, ok := s.raw[k]; ok {
			r = rr
		}
		if m != r {
			out.raw[m] = r
		}
	}
	return out
}

func shiftIndex(key string, lists []string, off map[string]int) string {
	for _, lp := range lists {
		rest, ok := strings.CutPrefix(key, lp+"[")
		if !ok {
			continue
		}
		j := strings.IndexByte(rest, ']')
		if j < 0 {
			return key
		}
		i, err := strconv.Atoi(rest[:j])
		if err != nil {
			return key
		}
		return fmt.Sprintf("%s[%d]%s", lp, i+off[lp], rest[j+1:])
	}
	return key
}
