package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"sync"

	"go.yaml.in/yaml/v3"
)

// MaxFileSize bounds a policy file; policies are small.
const MaxFileSize = 1 << 20

// LoadFile reads a policy file and returns it layered on its profile (the
// one its `profile:` field names, "default" when absent). Every error
// wraps ErrInvalid and names the file, the line and the field.
func LoadFile(path string) (*Policy, error) {
	raw, err := LoadFileRaw(path)
	if err != nil {
		return nil, err
	}
	return WithProfile(raw, "")
}

// Parse is LoadFile for data already in memory; name is used in errors.
func Parse(name string, data []byte) (*Policy, error) {
	raw, err := ParseRaw(name, data)
	if err != nil {
		return nil, err
	}
	return WithProfile(raw, "")
}

// LoadFileRaw reads a policy file without layering it on a profile: the
// result holds only what the file says (see WithProfile).
func LoadFileRaw(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Msg: errMsg(err)}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, &Error{File: path, Msg: errMsg(err)}
	}
	return ParseRaw(path, data)
}

func errMsg(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	return err.Error()
}

var yamlLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: line (\d+): (.*)$`) })

// ParseRaw decodes one YAML document strictly, without layering it on a
// profile. It checks everything that can be checked without the
// environment (types, unknown fields, version, path syntax, limits,
// network entries, secrets); Resolve checks the rest.
func ParseRaw(name string, data []byte) (p *Policy, err error) {
	if len(data) > MaxFileSize {
		return nil, &Error{File: name, Msg: fmt.Sprintf("larger than %d bytes", MaxFileSize)}
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return nil, &Error{File: name, Msg: "contains a NUL byte"}
	}
	var doc yaml.Node
	if err := decodeYAML(data, &doc); err != nil {
		msg := err.Error()
		line := 0
		if m := yamlLine().FindStringSubmatch(msg); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = "yaml: " + m[2]
		}
		return nil, &Error{File: name, Line: line, Msg: msg}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, &Error{File: name, Line: 1, Field: "version", Msg: "empty policy (a policy starts with version: 1)"}
	}
	root := doc.Content[0]
	d := &decoder{src: &source{file: name, lines: map[string]int{}}}
	p = &Policy{}
	d.decode(root, reflect.ValueOf(p).Elem(), "", 0, false)
	versionErr := false
	for _, e := range d.errs {
		versionErr = versionErr || e.Field == "version" || e.Field == ""
	}
	if d.nodes <= maxNodes && !versionErr {
		if line, ok := d.src.lines["version"]; !ok {
			d.errs = append(d.errs, &Error{File: name, Line: root.Line, Field: "version", Msg: "required (this build understands version: 1)"})
		} else if p.Version != Version {
			d.errs = append(d.errs, &Error{File: name, Line: line, Field: "version", Msg: fmt.Sprintf("unsupported version %d (this build understands version: %d)", p.Version, Version)})
		}
	}
	p.src = d.src
	if d.nodes <= maxNodes {
		// Semantic checks also on a partly decoded policy, so one run
		// reports every problem; fields that failed to decode are zero.
		d.errs = append(d.errs, p.check(false)...)
	}
	if len(d.errs) > 0 {
		sort.SliceStable(d.errs, func(i, j int) bool { return d.errs[i].Line < d.errs[j].Line })
		return nil, joinErrors(d.errs)
	}
	return p, nil
}

// decodeYAML parses exactly one document into doc. The parser is third-
// party code fed untrusted input: a panic in it becomes an error.
func decodeYAML(data []byte, doc *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: parser failed: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(doc); err != nil {
		if err == io.EOF {
			return nil
		}
		return err
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == io.EOF:
		return nil
	case err != nil:
		return err
	default:
		return fmt.Errorf("yaml: line %d: more than one document (a policy file holds one)", extra.Line)
	}
}

// WithProfile layers raw (a policy as its file says it) on the built-in
// profile named by name, or by raw.Profile when name is empty, or
// "default". The result's Profile is that name. See Merge for the rule.
func WithProfile(raw *Policy, name string) (*Policy, error) {
	if name == "" {
		name = raw.Profile
	}
	if name == "" {
		name = "default"
	}
	base, err := Profile(name)
	if err != nil {
		if raw.Profile == name && raw.src != nil {
			file, line, _ := raw.src.locate("profile")
			return nil, &Error{File: file, Line: line, Field: "profile", Msg: message(err)}
		}
		return nil, err
	}
	out := Merge(base, raw)
	out.Profile = name
	return out, nil
}
