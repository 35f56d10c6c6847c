package lint

import (
	"go/ast"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// maxFuncLines is STYLE.md's "functions under ~80 lines", counted from
// the func keyword to the closing brace.
const maxFuncLines = 80

// TestFunctionLength fails on any production function over maxFuncLines:
// a long one is split by stage, each stage undoing what it made on error.
func TestFunctionLength(t *testing.T) {
	files, fset := goFiles(t)
	var bad []string
	for p, f := range files {
		if strings.HasPrefix(p, "testdata/") || strings.Contains(p, "/testdata/") {
			continue // test programs, as _test.go files are
		}
		if ast.IsGenerated(f) {
			continue // generated code (protoc's): its generator decides its shape
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if n <= maxFuncLines {
				continue
			}
			bad = append(bad, fset.Position(fd.Pos()).String()+": "+funcName(fd)+" is "+strconv.Itoa(n)+" lines")
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s (at most %d: split it by stage, each stage with its own undo where it creates things)", b, maxFuncLines)
	}
}

// funcName is Recv.Name for a method, else Name.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
