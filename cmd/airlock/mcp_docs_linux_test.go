package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// mcpEntry is one server of an mcp.json (Claude Code, Cursor) or a Codex
// [mcp_servers.NAME] table.
type mcpEntry struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

var configBlock = regexp.MustCompile("(?s)<!-- mcp-config: ([a-z-]+) -->\n```(json|toml)\n(.*?)\n```")

// parseCodexTOML reads the subset of TOML the Codex snippet uses: table
// headers [mcp_servers.NAME] and key = value lines whose values are TOML
// basic strings or arrays of them (both also valid JSON). Anything else is
// an error, so the snippet cannot drift into what this parser ignores.
func parseCodexTOML(text string) (map[string]mcpEntry, error) {
	out := map[string]mcpEntry{}
	var cur string
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "[mcp_servers.") && strings.HasSuffix(line, "]"):
			cur = strings.TrimSuffix(strings.TrimPrefix(line, "[mcp_servers."), "]")
			out[cur] = mcpEntry{}
			continue
		}
		k, v, ok := strings.Cut(line, " = ")
		if !ok || cur == "" {
			return nil, fmt.Errorf("line %d: %q: want key = value inside [mcp_servers.NAME]", n, line)
		}
		e := out[cur]
		var err error
		switch k {
		case "command":
			err = json.Unmarshal([]byte(v), &e.Command)
		case "args":
			err = json.Unmarshal([]byte(v), &e.Args)
		case "url":
			err = json.Unmarshal([]byte(v), &e.URL)
		default:
			err = fmt.Errorf("unknown key")
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %s: %v", n, k, err)
		}
		out[cur] = e
	}
	return out, sc.Err()
}

// TestMCPConfigSnippets parses the Claude Code, Cursor and Codex snippets of
// docs/mcp.md and starts every stdio server they name (with this tree's
// binary for "airlock") to list its tools.
func TestMCPConfigSnippets(t *testing.T) {
	doc, err := os.ReadFile("../../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := configBlock.FindAllStringSubmatch(string(doc), -1)
	var clients []string
	for _, b := range blocks {
		client, format, text := b[1], b[2], b[3]
		clients = append(clients, client)
		var servers map[string]mcpEntry
		if format == "json" {
			var f struct {
				MCPServers map[string]mcpEntry `json:"mcpServers"`
			}
			dec := json.NewDecoder(bytes.NewReader([]byte(text)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&f); err != nil {
				t.Fatalf("%s snippet: %v", client, err)
			}
			servers = f.MCPServers
		} else if servers, err = parseCodexTOML(text); err != nil {
			t.Fatalf("%s snippet: %v", client, err)
		}
		if len(servers) == 0 {
			t.Fatalf("%s snippet: no servers", client)
		}
		for name, e := range servers {
			t.Run(client+"/"+name, func(t *testing.T) {
				if e.URL != "" {
					if !regexp.MustCompile(`^http://127\.0\.0\.1:8765/mcp$`).MatchString(e.URL) ||
						!strings.Contains(string(doc), "airlock mcp --http 127.0.0.1:8765") {
						t.Fatalf("url %q does not match the documented airlock mcp --http command", e.URL)
					}
					return
				}
				if e.Command != "airlock" || len(e.Args) == 0 || e.Args[0] != "mcp" {
					t.Fatalf("want command airlock with args [mcp ...]: %+v", e)
				}
				testutil.RequireLinux(t)
				var env []string
				for k, v := range e.Env {
					env = append(env, k+"="+v)
				}
				s := mcpSession(t, append(env, "AIRLOCK_HOST="), e.Args[1:]...)
				tools, err := s.ListTools(context.Background(), nil)
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, tl := range tools.Tools {
					names = append(names, tl.Name)
				}
				if !slices.Contains(names, "create_sandbox") || !slices.Contains(names, "run_code") {
					t.Fatalf("tools: %v", names)
				}
			})
		}
	}
	for _, want := range []string{"claude-code", "cursor", "codex"} {
		if !slices.Contains(clients, want) {
			t.Errorf("docs/mcp.md has no %s snippet", want)
		}
	}
}
