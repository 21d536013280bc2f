package middleware_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoInit: nothing in the module's library code (tests, cmd and
// examples aside) is wired by an init function: no init-time registry
// (docs/architecture.md).
func TestNoInit(t *testing.T) {
	const mod = "github.com/agentstop/agentstop/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{.Dir}}{{range .GoFiles}} {{.}}{{end}}`, mod+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	files := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || strings.HasPrefix(f[0], mod+"cmd/") || strings.HasPrefix(f[0], mod+"examples/") {
			continue
		}
		for _, name := range f[2:] {
			path := filepath.Join(f[1], name)
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files++
			for _, d := range file.Decls {
				if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == "init" {
					t.Errorf("%s: func init: wire it explicitly instead", fset.Position(fn.Pos()))
				}
			}
		}
	}
	if files < 100 {
		t.Fatalf("read %d files of the module's library code, want many more:\n%s", files, out)
	}
}
