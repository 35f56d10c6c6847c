package sdk_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/internal/testutil"
)

type schema struct {
	Properties map[string]any `yaml:"properties"`
	AllOf      []struct {
		Ref        string         `yaml:"$ref"`
		Properties map[string]any `yaml:"properties"`
	} `yaml:"allOf"`
}

type document struct {
	Paths      map[string]map[string]any `yaml:"paths"`
	Components struct {
		Schemas map[string]schema `yaml:"schemas"`
	} `yaml:"components"`
}

func loadDoc(t *testing.T) *document {
	t.Helper()
	var d document
	if err := yaml.Unmarshal(api.OpenAPI, &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

// operations returns "METHOD /path" for every operation of the document.
func (d *document) operations() []string {
	var ops []string
	for p, methods := range d.Paths {
		for m := range methods {
			switch m {
			case "get", "post", "put", "patch", "delete":
				ops = append(ops, strings.ToUpper(m)+" "+p)
			}
		}
	}
	sort.Strings(ops)
	return ops
}

// fields returns the property names of schema name (allOf merged).
func (d *document) fields(t reporter, name string) []string {
	t.Helper()
	s, ok := d.Components.Schemas[name]
	if !ok {
		t.Fatalf("openapi.yaml has no schema %q", name)
	}
	var out []string
	for k := range s.Properties {
		out = append(out, k)
	}
	for _, part := range s.AllOf {
		if part.Ref != "" {
			out = append(out, d.fields(t, strings.TrimPrefix(part.Ref, "#/components/schemas/"))...)
		}
		for k := range part.Properties {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// sdkSurface is what one SDK declares: its route table, the operations it
// leaves out, and the fields of its types by type name.
type sdkSurface struct {
	Routes     map[string][2]string `json:"routes"`
	NotCovered map[string]string    `json:"not_covered"`
	Types      map[string][]string  `json:"types"`
	sources    string               // the SDK's code outside the route table
}

// pairs maps each SDK type to the OpenAPI schema it mirrors.
var pythonTypes = map[string]string{
	"CreateSandboxRequest": "CreateSandboxRequest", "PatchSandboxRequest": "PatchSandboxRequest",
	"NetworkRequest": "NetworkRequest", "RequestRule": "RequestRule", "ExecRequest": "ExecRequest", "CodeRequest": "CodeRequest",
	"SignalRequest": "SignalRequest", "RenameRequest": "RenameRequest", "MkdirRequest": "MkdirRequest",
	"SandboxInfo": "Sandbox", "Stats": "Stats", "ExitStatus": "ExitStatus", "CommandResult": "ExecResult",
	"ProcessInfo": "Process", "FileInfo": "FileInfo", "CodeResult": "CodeResult", "CodeError": "CodeError",
	"CodeImage": "CodeImage", "Event": "Event",
	"KeepAliveSpec": "KeepAliveSpec", "PauseRequest": "PauseRequest", "CheckpointRequest": "CheckpointRequest",
	"RollbackRequest": "RollbackRequest", "Checkpoint": "Checkpoint",
}

var typescriptTypes = map[string]string{
	"CreateSandboxRequest": "CreateSandboxRequest", "PatchSandboxRequest": "PatchSandboxRequest",
	"NetworkRequest": "NetworkRequest", "RequestRule": "RequestRule", "ExecRequest": "ExecRequest", "CodeRequest": "CodeRequest",
	"SignalRequest": "SignalRequest", "RenameRequest": "RenameRequest", "MkdirRequest": "MkdirRequest",
	"SandboxInfo": "Sandbox", "Stats": "Stats", "ExitStatus": "ExitStatus", "ExecResult": "ExecResult",
	"Process": "Process", "FileInfo": "FileInfo", "CodeResult": "CodeResult", "CodeError": "CodeError",
	"CodeImage": "CodeImage", "Event": "Event", "Frame": "Frame",
	"KeepAliveSpec": "KeepAliveSpec", "PauseRequest": "PauseRequest", "CheckpointRequest": "CheckpointRequest",
	"RollbackRequest": "RollbackRequest", "Checkpoint": "Checkpoint",
}

const pythonIntrospect = `
import dataclasses, json, typing
from airlock import _routes, types
out = {"routes": _routes.ROUTES, "not_covered": _routes.NOT_COVERED, "types": {}}
for name in dir(types):
    obj = getattr(types, name)
    if isinstance(obj, type) and obj.__module__ == types.__name__:
        if dataclasses.is_dataclass(obj):
            out["types"][name] = [f.name for f in dataclasses.fields(obj)]
        elif typing.is_typeddict(obj):
            out["types"][name] = list(obj.__annotations__)
print(json.dumps(out))
`

func pythonSurface(t *testing.T) *sdkSurface {
	t.Helper()
	py := testutil.RequireBinary(t, "python3")
	cmd := exec.Command(py, "-c", pythonIntrospect)
	cmd.Env = append(os.Environ(), "PYTHONPATH=python", "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("introspect sdk/python: %v: %s", err, stderr)
	}
	var s sdkSurface
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatal(err)
	}
	s.sources = readSources(t, "python/airlock", ".py", "_routes.py")
	return &s
}

var (
	tsRoute     = regexp.MustCompile(`(?m)^\s+(\w+): \["(GET|POST|PUT|PATCH|DELETE)", "([^"]+)"\],$`)
	tsNotCov    = regexp.MustCompile(`(?m)^\s+"((?:GET|POST|PUT|PATCH|DELETE) [^"]+)": "`)
	tsInterface = regexp.MustCompile(`(?ms)^export interface (\w+)(?: extends (\w+))? \{\n(.*?)^\}`)
	tsProp      = regexp.MustCompile(`(?m)^  (\w+)\??:`)
)

func typescriptSurface(t *testing.T) *sdkSurface {
	t.Helper()
	routes, err := os.ReadFile("typescript/src/routes.ts")
	if err != nil {
		t.Fatal(err)
	}
	types, err := os.ReadFile("typescript/src/types.ts")
	if err != nil {
		t.Fatal(err)
	}
	s := &sdkSurface{Routes: map[string][2]string{}, NotCovered: map[string]string{}, Types: map[string][]string{}}
	for _, m := range tsRoute.FindAllStringSubmatch(string(routes), -1) {
		s.Routes[m[1]] = [2]string{m[2], m[3]}
	}
	for _, m := range tsNotCov.FindAllStringSubmatch(string(routes), -1) {
		s.NotCovered[m[1]] = "x"
	}
	base := map[string]string{}
	for _, m := range tsInterface.FindAllStringSubmatch(string(types), -1) {
		for _, p := range tsProp.FindAllStringSubmatch(m[3], -1) {
			s.Types[m[1]] = append(s.Types[m[1]], p[1])
		}
		base[m[1]] = m[2]
	}
	for name, b := range base {
		if b != "" {
			s.Types[name] = append(s.Types[name], s.Types[b]...)
		}
	}
	s.sources = readSources(t, "typescript/src", ".ts", "routes.ts")
	return s
}

func readSources(t *testing.T, dir, ext, skip string) string {
	t.Helper()
	var b strings.Builder
	files, err := filepath.Glob(filepath.Join(dir, "*"+ext))
	if err != nil || len(files) == 0 {
		t.Fatalf("no %s sources in %s", ext, dir)
	}
	for _, f := range files {
		if filepath.Base(f) == skip {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}

// reporter is the part of testing.TB check uses (a fake in the drift test).
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// check compares one SDK's surface with the document.
func check(t reporter, d *document, s *sdkSurface, pairs map[string]string, quote string) {
	ops := d.operations()
	covered := map[string]string{}
	for name, r := range s.Routes {
		op := r[0] + " " + r[1]
		if !slices.Contains(ops, op) {
			t.Errorf("route %s (%s) is not in api/openapi.yaml", name, op)
		}
		if prev, dup := covered[op]; dup {
			t.Errorf("routes %s and %s are both %s", prev, name, op)
		}
		covered[op] = name
		// A route in the table that no code calls would satisfy this test
		// without the SDK offering the operation.
		if !strings.Contains(s.sources, quote+name+quote) {
			t.Errorf("route %s is declared but never called", name)
		}
	}
	for op := range s.NotCovered {
		if !slices.Contains(ops, op) {
			t.Errorf("NOT_COVERED names %s, which api/openapi.yaml does not have", op)
		}
		if _, both := covered[op]; both {
			t.Errorf("%s is both covered and not covered", op)
		}
	}
	for _, op := range ops {
		if _, ok := covered[op]; !ok {
			if _, ok := s.NotCovered[op]; !ok {
				t.Errorf("api/openapi.yaml has %s: call it from the SDK, or list it in NOT_COVERED with the reason", op)
			}
		}
	}
	for sdkType, schemaName := range pairs {
		got, ok := s.Types[sdkType]
		if !ok {
			t.Errorf("type %s (schema %s) is missing", sdkType, schemaName)
			continue
		}
		sort.Strings(got)
		want := d.fields(t, schemaName)
		if !slices.Equal(slices.Compact(got), want) {
			t.Errorf("type %s: fields %v, schema %s has %v", sdkType, got, schemaName, want)
		}
	}
}

func TestPythonSDKMatchesOpenAPI(t *testing.T) {
	check(t, loadDoc(t), pythonSurface(t), pythonTypes, `"`)
}

func TestTypeScriptSDKMatchesOpenAPI(t *testing.T) {
	check(t, loadDoc(t), typescriptSurface(t), typescriptTypes, `"`)
}

// The check itself must catch drift: an operation and a field the SDK
// does not know make it fail.
func TestConformanceCatchesDrift(t *testing.T) {
	d := loadDoc(t)
	d.Paths["/v1/sandboxes/{id}/brand-new"] = map[string]any{"post": map[string]any{}}
	cr := d.Components.Schemas["CodeRequest"]
	props := map[string]any{"new_field": nil}
	for k, v := range cr.Properties {
		props[k] = v
	}
	d.Components.Schemas["CodeRequest"] = schema{Properties: props}
	ft := &fakeT{}
	check(ft, d, typescriptSurface(t), typescriptTypes, `"`)
	if !strings.Contains(ft.errs, "brand-new") || !strings.Contains(ft.errs, "new_field") {
		t.Fatalf("drift not caught: %q", ft.errs)
	}
}

type fakeT struct{ errs string }

func (f *fakeT) Helper()                           {}
func (f *fakeT) Errorf(format string, args ...any) { f.errs += "\n" + fmt.Sprintf(format, args...) }
func (f *fakeT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// TestSDKsMapEveryErrorCode: every error code of the API's table has its
// exception class in both SDKs (a new code without them fails here), but
// internal and canceled, which have no class of their own.
func TestSDKsMapEveryErrorCode(t *testing.T) {
	for _, f := range []string{"python/airlock/errors.py", "typescript/src/errors.ts"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, code := range api.Codes() {
			if code == api.CodeInternal || code == api.CodeCanceled {
				continue
			}
			if !strings.Contains(string(b), `"`+code+`":`) && !strings.Contains(string(b), "\n  "+code+": ") {
				t.Errorf("%s: no class for error code %q", f, code)
			}
		}
	}
}
