package microvm

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// apiDesc is testdata/firecracker-api.json.
type apiDesc struct {
	Operations  map[string]struct{ Schema string } `json:"operations"`
	Definitions map[string]struct {
		Required   []string `json:"required"`
		OneOf      []string `json:"exactly_one_of"`
		Properties map[string]struct {
			Type    string   `json:"type"`
			Enum    []string `json:"enum"`
			Minimum *float64 `json:"minimum"`
			Maximum *float64 `json:"maximum"`
			Ref     string   `json:"ref"`
		} `json:"properties"`
	} `json:"definitions"`
}

func loadAPI(t *testing.T) apiDesc {
	b, err := os.ReadFile("testdata/firecracker-api.json")
	if err != nil {
		t.Fatal(err)
	}
	var d apiDesc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// operation finds the API operation of a request ("PUT /drives/x" matches
// "PUT /drives/{drive_id}").
func (d apiDesc) operation(r fcRequest) (string, bool) {
	for op, o := range d.Operations {
		m, p, _ := strings.Cut(op, " ")
		re := regexp.MustCompile("^" + regexp.MustCompile(`\\\{[a-z_]+\\\}`).ReplaceAllString(regexp.QuoteMeta(p), `[^/]+`) + "$")
		if m == r.Method && re.MatchString(r.Path) {
			return o.Schema, true
		}
	}
	return "", false
}

// check validates a JSON value against a definition: every required
// field present, no unknown field, types, enums and bounds respected.
func (d apiDesc) check(schema string, v map[string]any) error {
	def, ok := d.Definitions[schema]
	if !ok {
		return fmt.Errorf("no definition %s", schema)
	}
	for _, r := range def.Required {
		if _, ok := v[r]; !ok {
			return fmt.Errorf("%s: required %q missing", schema, r)
		}
	}
	if len(def.OneOf) > 0 {
		n := 0
		for _, f := range def.OneOf {
			if _, ok := v[f]; ok {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%s: exactly one of %v, got %d", schema, def.OneOf, n)
		}
	}
	for k, val := range v {
		p, ok := def.Properties[k]
		if !ok {
			return fmt.Errorf("%s: unknown property %q", schema, k)
		}
		switch p.Type {
		case "string":
			s, ok := val.(string)
			if !ok {
				return fmt.Errorf("%s.%s: want string, got %T", schema, k, val)
			}
			if len(p.Enum) > 0 && !slices.Contains(p.Enum, s) {
				return fmt.Errorf("%s.%s: %q not in %v", schema, k, s, p.Enum)
			}
		case "integer":
			f, ok := val.(float64)
			if !ok || f != float64(int64(f)) {
				return fmt.Errorf("%s.%s: want integer, got %v", schema, k, val)
			}
			if p.Minimum != nil && f < *p.Minimum || p.Maximum != nil && f > *p.Maximum {
				return fmt.Errorf("%s.%s: %v out of bounds", schema, k, f)
			}
		case "boolean":
			if _, ok := val.(bool); !ok {
				return fmt.Errorf("%s.%s: want boolean, got %T", schema, k, val)
			}
		case "object":
			o, ok := val.(map[string]any)
			if !ok {
				return fmt.Errorf("%s.%s: want object, got %T", schema, k, val)
			}
			if p.Ref != "" {
				if err := d.check(p.Ref, o); err != nil {
					return err
				}
			}
		case "array":
			if _, ok := val.([]any); !ok {
				return fmt.Errorf("%s.%s: want array, got %T", schema, k, val)
			}
		}
	}
	return nil
}

func (d apiDesc) validate(t *testing.T, reqs []fcRequest) {
	t.Helper()
	for _, r := range reqs {
		schema, ok := d.operation(r)
		if !ok {
			t.Errorf("%s %s: no such operation in the API", r.Method, r.Path)
			continue
		}
		raw, _ := json.Marshal(r.Body)
		var v map[string]any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Errorf("%s: body is not an object: %s", r, raw)
			continue
		}
		if err := d.check(schema, v); err != nil {
			t.Errorf("%s: %v", r, err)
		}
	}
}

// TestFirecrackerRequests checks every request the Firecracker driver sends
// (boot, snapshot, restore) against the published API description.
func TestFirecrackerRequests(t *testing.T) {
	d := loadAPI(t)
	m := &Machine{ID: "x", Dir: "/run/vm/x", Kernel: "/k/vmlinux", Initrd: "/k/initrd", Cmdline: "console=ttyS0 -- __vminit",
		VCPUs: 2, MemoryMiB: 1216, Disks: []Disk{{ID: "image", Path: "/img/root.erofs", ReadOnly: true}},
		Shares: []Share{{Tag: "share0", Path: "/empty", ReadOnly: true, Unused: true}}}
	boot, err := fcBootRequests(m)
	if err != nil {
		t.Fatal(err)
	}
	d.validate(t, boot)
	if last := boot[len(boot)-1]; last.Path != "/actions" {
		t.Fatalf("InstanceStart is not last: %v", last)
	}
	var bs fcBootSource
	for _, r := range boot {
		if b, ok := r.Body.(fcBootSource); ok {
			bs = b
		}
	}
	if !strings.Contains(bs.BootArgs, "airlock.vsock=1 -- __vminit") {
		t.Fatalf("boot args %q: the init must be told to use vsock, before --", bs.BootArgs)
	}
	d.validate(t, fcSnapshotRequests("/s/state", "/s/mem"))
	d.validate(t, fcRestoreRequests("/s/state", "/s/mem"))
	// A share cannot be expressed: refused, not dropped.
	m.Shares = []Share{{Tag: "share0", Path: "/work"}}
	if _, err := fcBootRequests(m); err == nil {
		t.Fatal("a shared directory was silently dropped")
	}
	// The validator itself rejects what the API would.
	if err := d.check("Vm", map[string]any{"state": "Stopped"}); err == nil {
		t.Fatal("validator accepted a bad enum")
	}
	if err := d.check("MachineConfiguration", map[string]any{"vcpu_count": 2.0}); err == nil {
		t.Fatal("validator accepted a missing required field")
	}
	if err := d.check("BootSource", map[string]any{"kernel_image_path": "/k", "kernel": "x"}); err == nil {
		t.Fatal("validator accepted an unknown field")
	}
}
