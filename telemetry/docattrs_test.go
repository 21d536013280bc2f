package telemetry_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestDocListsEveryAttributeKey: the package doc lists every attribute key
// the Recorder sets (the exported Key… constants), so that a key added to
// the spans cannot go undocumented.
func TestDocListsEveryAttributeKey(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "recorder.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ast.Inspect(f, func(node ast.Node) bool {
		call, ok := node.(*ast.CallExpr)
		if !ok || len(call.Args) != 1 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Key" {
			return true
		}
		lit, ok := call.Args[0].(*ast.BasicLit)
		if !ok {
			return true
		}
		key, _ := strconv.Unquote(lit.Value)
		n++
		if !strings.Contains(string(doc), key) {
			t.Errorf("attribute key %q is not in the package doc (doc.go)", key)
		}
		return true
	})
	if n < 10 {
		t.Fatalf("found %d attribute keys in recorder.go; the test no longer finds them", n)
	}
}
