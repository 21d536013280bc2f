package middleware_test

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeShowsExampleRange keeps the README's wrap example identical
// to ExampleRange, which go test compiles and runs: the README leads with
// the break-safe ways in.
func TestReadmeShowsExampleRange(t *testing.T) {
	assertReadmeShowsExample(t, "example_test.go", "ExampleRange")
}

// TestReadmeShowsExampleWithTreeLimits keeps the README's Trees example
// identical to ExampleWithTreeLimits, which go test compiles and runs.
func TestReadmeShowsExampleWithTreeLimits(t *testing.T) {
	assertReadmeShowsExample(t, "example_tree_test.go", "ExampleWithTreeLimits")
}

// assertReadmeShowsExample checks that ../README.md shows the body of the
// example function name, defined in file, verbatim in a go code block.
func assertReadmeShowsExample(t *testing.T, file, name string) {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(src), "func "+name+"() {\n")
	if !ok {
		t.Fatal(name + " not found")
	}
	body, _, _ = strings.Cut(body, "\n}\n")
	lines := strings.Split(body, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "\t")
	}
	want := "```go\n" + strings.Join(lines, "\n") + "\n```"
	if !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not show %s verbatim; it should contain:\n%s", name, want)
	}
}

// TestReadmeShowsExampleWithShadowPolicy keeps the README's shadow example
// identical to ExampleWithShadowPolicy, which go test compiles and runs.
func TestReadmeShowsExampleWithShadowPolicy(t *testing.T) {
	assertReadmeShowsExample(t, "example_shadow_test.go", "ExampleWithShadowPolicy")
}
