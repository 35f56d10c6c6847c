package lint

import (
	"go/ast"
	"go/token"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// internal/mountinfo is the one mountinfo parser: a file that names a
// mountinfo file hands it to that package rather than splitting its lines
// itself (four hand-written parsers had drifted: escapes undone in some,
// optional fields miscounted in others).
func TestOneMountinfoParser(t *testing.T) {
	files, fset := goFiles(t)
	var bad []string
	for p, f := range files {
		if strings.HasPrefix(p, "internal/mountinfo/") {
			continue
		}
		names := false
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if v, err := strconv.Unquote(lit.Value); err == nil && strings.HasSuffix(v, "/mountinfo") {
					names = true
				}
			}
			return !names
		})
		if names && !imports(f, "github.com/airlock-dev/airlock/internal/mountinfo") {
			bad = append(bad, fset.Position(f.Package).Filename)
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s names a mountinfo file without internal/mountinfo: parse it with mountinfo.Read or Self", b)
	}
}

func imports(f *ast.File, path string) bool {
	for _, im := range f.Imports {
		if v, _ := strconv.Unquote(im.Path.Value); v == path {
			return true
		}
	}
	return false
}
