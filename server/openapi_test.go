package server

import (
	"bytes"
	"context"
	"sort"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

type openapiDoc struct {
	Paths map[string]map[string]yaml.Node `yaml:"paths"`
}

type openapiOp struct {
	Responses map[string]yaml.Node `yaml:"responses"`
}

// TestOpenAPIMatchesServer sends one plausible request for every path and
// method in api/openapi.yaml to a real server and checks the answer's
// status is one the document lists for it (so every documented route
// exists and answers as documented).
func TestOpenAPIMatchesServer(t *testing.T) {
	t.Parallel()
	var doc openapiDoc
	if err := yaml.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, withImages(t))
	ctx := context.Background()
	c := ts.local(t)
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WriteFile(ctx, sb.ID, "/tmp/f", strings.NewReader("x"), 0); err != nil {
		t.Fatal(err)
	}
	p, err := c.Start(ctx, sb.ID, client.ExecOptions{Args: []string{"sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	del, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// A plausible body and query per operation; order matters for the
	// destructive ones (see below).
	bodies := map[string]string{
		"POST /v1/sandboxes":                             `{}`,
		"PATCH /v1/sandboxes/{id}":                       `{"timeout":"5m"}`,
		"PUT /v1/sandboxes/{id}/network":                 `{"mode":"none"}`,
		"POST /v1/sandboxes/{id}/exec":                   `{"args":["true"]}`,
		"POST /v1/sandboxes/{id}/processes/{pid}/signal": `{"signal":15}`,
		"POST /v1/sandboxes/{id}/files/rename":           `{"from":"/tmp/f","to":"/tmp/g"}`,
		"POST /v1/sandboxes/{id}/files/mkdir":            `{"path":"/tmp/d"}`,
		"PUT /v1/sandboxes/{id}/files":                   `hello`,
		"PUT /v1/sandboxes/{id}/archive":                 "",
		"POST /v1/sandboxes/{id}/processes/{pid}/stdin":  `x`,
		"POST /v1/sandboxes/{id}/browser/navigate":       `{"url":"about:blank"}`,
		"POST /v1/sandboxes/{id}/browser/screenshot":     `{}`,
		"POST /v1/images/pull":                           `{"ref":"127.0.0.1:1/nothing:1"}`,
		"POST /v1/images/prune":                          `{}`,
		"POST /v1/images/import":                         `not a tarball`,
		"POST /v1/sandboxes/{id}/port-tokens":            `{"port":8000,"ttl":"1m"}`,
		"POST /v1/volumes":                               `{"name":"v1","size_bytes":16777216}`,
	}
	queries := map[string]string{
		"/v1/sandboxes/{id}/files":       "?path=/tmp/f",
		"/v1/sandboxes/{id}/files/stat":  "?path=/tmp",
		"/v1/sandboxes/{id}/files/list":  "?path=/tmp",
		"/v1/sandboxes/{id}/archive":     "?path=/tmp",
		"/v1/sandboxes/{id}/files/watch": "?path=/tmp/nowhere",
	}
	var ops []string
	for path, methods := range doc.Paths {
		for m := range methods {
			switch m {
			case "get", "post", "put", "patch", "delete":
				ops = append(ops, strings.ToUpper(m)+" "+path)
			}
		}
	}
	// Destructive operations last: process delete, file delete, sandbox delete.
	rank := func(op string) int {
		switch {
		case strings.HasPrefix(op, "DELETE /v1/sandboxes/{id}/processes"):
			return 1
		case strings.HasPrefix(op, "DELETE /v1/sandboxes/{id}/files"):
			return 2
		case op == "DELETE /v1/sandboxes/{id}":
			return 3
		}
		return 0
	}
	sort.Slice(ops, func(i, j int) bool {
		if rank(ops[i]) != rank(ops[j]) {
			return rank(ops[i]) < rank(ops[j])
		}
		return ops[i] < ops[j]
	})
	if len(ops) < 25 {
		t.Fatalf("only %d operations in the document", len(ops))
	}
	for _, op := range ops {
		method, path, _ := strings.Cut(op, " ")
		var o openapiOp
		node := doc.Paths[path][strings.ToLower(method)]
		if err := node.Decode(&o); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		id := sb.ID
		if op == "DELETE /v1/sandboxes/{id}" {
			id = del.ID
		}
		url := strings.NewReplacer("{id}", id, "{pid}", p.ID).Replace(path) + queries[path]
		body, ok := bodies[op]
		ctype := ""
		if ok && strings.HasPrefix(body, "{") {
			ctype = "application/json"
		} else if ok {
			ctype = "application/octet-stream"
		}
		if op == "PUT /v1/sandboxes/{id}/archive" {
			body = string(emptyTar())
			ctype = "application/x-tar"
		}
		if op == "POST /v1/sandboxes/{id}/processes/{pid}/wait" {
			url += "?timeout=10ms"
		}
		resp, got := rawDo(t, ts, method, url, ctype, strings.NewReader(body))
		status := strconv.Itoa(resp.StatusCode)
		if _, ok := o.Responses[status]; !ok {
			t.Errorf("%s: status %s not documented (documented: %v): %s", op, status, keys(o.Responses), truncate(got))
		}
		if resp.StatusCode >= 400 && resp.StatusCode != 426 && resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: error %d without a JSON body", op, resp.StatusCode)
		}
	}
}

func emptyTar() []byte {
	var b bytes.Buffer
	b.Write(make([]byte, 1024))
	return b.Bytes()
}

func keys(m map[string]yaml.Node) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

// TestServerRoutesAreDocumented: the other direction, every endpoint the
// server routes is in the document.
func TestServerRoutesAreDocumented(t *testing.T) {
	t.Parallel()
	var doc openapiDoc
	if err := yaml.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, nil)
	patterns := append([]string{}, publicRoutes...)
	for _, rt := range ts.srv.apiRoutes() {
		patterns = append(patterns, rt.pattern)
	}
	for _, p := range patterns {
		method, path, _ := strings.Cut(p, " ")
		if _, ok := doc.Paths[path][strings.ToLower(method)]; !ok {
			t.Errorf("%s is routed but not in api/openapi.yaml", p)
		}
	}
}

// The document's error codes are api's code table, all of them.
func TestOpenAPIErrorCodes(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas struct {
				ErrorBody struct {
					Properties struct {
						Error struct {
							Properties struct {
								Code struct {
									Enum []string `yaml:"enum"`
								} `yaml:"code"`
							} `yaml:"properties"`
						} `yaml:"error"`
					} `yaml:"properties"`
				} `yaml:"ErrorBody"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	got := doc.Components.Schemas.ErrorBody.Properties.Error.Properties.Code.Enum
	if strings.Join(got, ",") != strings.Join(api.Codes(), ",") {
		t.Fatalf("openapi.yaml error codes %v, api's table %v", got, api.Codes())
	}
}
