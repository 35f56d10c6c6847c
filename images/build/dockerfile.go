package build

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/airlock-dev/airlock/errdefs"
)

// Instruction is one Dockerfile instruction.
type Instruction struct {
	Line int    // where it starts, 1-based
	Cmd  string // upper case: FROM, RUN, ...
	// Args is the rest of the line (continuations joined); Exec is set
	// for a JSON array (exec form of RUN, CMD, ENTRYPOINT) with its items.
	Args string
	Exec []string
	// Flags are leading --name=value options (COPY --chown=...).
	Flags []string
}

// supported lists what Build runs; everything else is refused by line.
var supported = map[string]bool{
	"FROM": true, "RUN": true, "COPY": true, "ADD": true, "ENV": true, "ARG": true,
	"WORKDIR": true, "USER": true, "ENTRYPOINT": true, "CMD": true, "LABEL": true,
}

// limits on untrusted Dockerfiles.
const (
	maxDockerfile = 1 << 20
	maxLine       = 64 << 10
)

// Parse reads a Dockerfile: comments, blank lines, backslash
// continuations; a parser directive line (# syntax=...) is a comment. It
// refuses instructions Build does not run, naming the line.
func Parse(name string, data []byte) ([]Instruction, error) {
	if len(data) > maxDockerfile {
		return nil, fmt.Errorf("%s: larger than %d bytes: %w", name, maxDockerfile, errdefs.ErrInvalid)
	}
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	var out []Instruction
	for i := 0; i < len(lines); i++ {
		start := i + 1
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
			line = strings.TrimSuffix(line, "\\")
			i++
			next := strings.TrimSpace(lines[i])
			for strings.HasPrefix(next, "#") && i+1 < len(lines) {
				i++ // comments inside a continued instruction
				next = strings.TrimSpace(lines[i])
			}
			line += " " + next
			if len(line) > maxLine {
				return nil, fmt.Errorf("%s:%d: instruction longer than %d bytes: %w", name, start, maxLine, errdefs.ErrInvalid)
			}
		}
		line = strings.TrimSuffix(line, "\\")
		cmd, rest, _ := strings.Cut(line, " ")
		if t := strings.IndexByte(cmd, '\t'); t >= 0 {
			cmd, rest = cmd[:t], cmd[t+1:]+" "+rest
		}
		in := Instruction{Line: start, Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(rest)}
		if !supported[in.Cmd] {
			return nil, fmt.Errorf("%s:%d: %s is not supported by airlock image build (it runs FROM, RUN, COPY, ADD, ENV, ARG, WORKDIR, USER, ENTRYPOINT, CMD, LABEL): %w", name, start, in.Cmd, errdefs.ErrNotSupported)
		}
		for strings.HasPrefix(in.Args, "--") {
			flag, rest, _ := strings.Cut(in.Args, " ")
			in.Flags = append(in.Flags, flag)
			in.Args = strings.TrimSpace(rest)
		}
		if strings.HasPrefix(in.Args, "[") {
			var items []string
			if err := json.Unmarshal([]byte(in.Args), &items); err == nil {
				in.Exec = items
			} else if in.Cmd == "RUN" || in.Cmd == "CMD" || in.Cmd == "ENTRYPOINT" {
				return nil, fmt.Errorf("%s:%d: %s: bad JSON array (%v): %w", name, start, in.Cmd, err, errdefs.ErrInvalid)
			}
		}
		if in.Args == "" && in.Cmd != "CMD" && in.Cmd != "ENTRYPOINT" {
			return nil, fmt.Errorf("%s:%d: %s needs arguments: %w", name, start, in.Cmd, errdefs.ErrInvalid)
		}
		out = append(out, in)
	}
	froms := 0
	for _, in := range out {
		if in.Cmd == "FROM" {
			froms++
			if froms > 1 {
				return nil, fmt.Errorf("%s:%d: a second FROM: multi-stage builds are not supported: %w", name, in.Line, errdefs.ErrNotSupported)
			}
		}
	}
	if froms == 0 {
		return nil, fmt.Errorf("%s: no FROM: %w", name, errdefs.ErrInvalid)
	}
	for _, in := range out {
		if in.Cmd == "FROM" {
			break
		}
		if in.Cmd != "ARG" {
			return nil, fmt.Errorf("%s:%d: %s before FROM (only ARG may come first): %w", name, in.Line, in.Cmd, errdefs.ErrInvalid)
		}
	}
	return out, nil
}

// expand substitutes $VAR, ${VAR}, ${VAR:-default} and ${VAR:+alt} from
// vars; \$ is a literal $. An unset variable is empty.
func expand(s string, vars map[string]string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) && s[i+1] == '$' {
			b.WriteByte('$')
			i++
			continue
		}
		if c != '$' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		if s[i+1] == '{' {
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", fmt.Errorf("unterminated ${ in %q: %w", s, errdefs.ErrInvalid)
			}
			body := s[i+2 : i+end]
			i += end
			name, mod, word := body, "", ""
			if k := strings.Index(body, ":"); k >= 0 && k+1 < len(body) {
				name, mod, word = body[:k], body[k:k+2], body[k+2:]
			}
			if !validName(name) {
				return "", fmt.Errorf("bad variable ${%s}: %w", body, errdefs.ErrInvalid)
			}
			v, set := vars[name]
			switch mod {
			case ":-":
				if !set || v == "" {
					v = word
				}
			case ":+":
				if set && v != "" {
					v = word
				} else {
					v = ""
				}
			case "":
			default:
				return "", fmt.Errorf("variable modifier %q in ${%s} not supported: %w", mod, body, errdefs.ErrNotSupported)
			}
			b.WriteString(v)
			continue
		}
		j := i + 1
		for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || j > i+1 && s[j] >= '0' && s[j] <= '9') {
			j++
		}
		if j == i+1 {
			b.WriteByte('$')
			continue
		}
		b.WriteString(vars[s[i+1:j]])
		i = j - 1
	}
	return b.String(), nil
}

func validName(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// keyValues parses ENV and LABEL arguments: k=v pairs (values may be
// "quoted"), or the legacy "KEY value with spaces" form.
func keyValues(args string) ([][2]string, error) {
	if !strings.Contains(strings.SplitN(args, " ", 2)[0], "=") {
		k, v, _ := strings.Cut(args, " ")
		return [][2]string{{k, strings.TrimSpace(v)}}, nil
	}
	var out [][2]string
	for _, w := range words(args) {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not KEY=VALUE: %w", w, errdefs.ErrInvalid)
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

// words splits on blanks outside double or single quotes, dropping the
// quotes (a backslash escapes the next character inside double quotes).
func words(s string) []string {
	var out []string
	var cur strings.Builder
	in, quote, started := false, byte(0), false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote == '"' && c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case quote != 0:
			cur.WriteByte(c)
		case c == '"' || c == '\'':
			quote, started = c, true
		case c == ' ' || c == '\t':
			if in || started {
				out = append(out, cur.String())
				cur.Reset()
			}
			in, started = false, false
			continue
		default:
			cur.WriteByte(c)
		}
		in = true
	}
	if in || started {
		out = append(out, cur.String())
	}
	return out
}
