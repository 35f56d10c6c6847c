package lint

import (
	"go/ast"
	"sort"
	"strings"
	"testing"
)

// No package-level variable compiles a regexp: the airlock binary is also
// every sandbox's init and agent, so package initialisation is paid on
// every sandbox start (a `{64}` repetition alone cost ~900 allocations).
// Compile on first use (sync.OnceValue) instead. Test helpers
// (internal/testutil) and tools/ are not in the binary.
func TestNoRegexpAtPackageInit(t *testing.T) {
	files, fset := goFiles(t)
	var bad []string
	for p, f := range files {
		if strings.HasPrefix(p, "tools/") || strings.HasPrefix(p, "internal/testutil/") || strings.Contains(p, "/testdata/") {
			continue
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range gd.Specs {
				vs, ok := spec.(*ast.ValueSpec)
				if !ok {
					continue
				}
				for _, v := range vs.Values {
					if call, ok := v.(*ast.CallExpr); ok && isRegexpCompile(call.Fun) {
						bad = append(bad, fset.Position(v.Pos()).String())
					}
				}
			}
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s: a regexp compiled at package init (use sync.OnceValue)", b)
	}
}

func isRegexpCompile(fun ast.Expr) bool {
	sel, ok := fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && x.Name == "regexp" && strings.HasPrefix(sel.Sel.Name, "MustCompile")
}
