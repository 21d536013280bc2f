package middleware_test

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeShowsExampleForward keeps the README's wrap example identical
// to ExampleForward, which go test compiles and runs.
func TestReadmeShowsExampleForward(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(src), "func ExampleForward() {\n")
	if !ok {
		t.Fatal("ExampleForward not found")
	}
	body, _, _ = strings.Cut(body, "\n}\n")
	lines := strings.Split(body, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "\t")
	}
	want := "```go\n" + strings.Join(lines, "\n") + "\n```"
	if !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not show ExampleForward verbatim; it should contain:\n%s", want)
	}
}

// TestReadmeShowsExampleWithTreeLimits keeps the README's Trees example
// identical to ExampleWithTreeLimits, which go test compiles and runs.
func TestReadmeShowsExampleWithTreeLimits(t *testing.T) {
	src, err := os.ReadFile("example_tree_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(src), "func ExampleWithTreeLimits() {\n")
	if !ok {
		t.Fatal("ExampleWithTreeLimits not found")
	}
	body, _, _ = strings.Cut(body, "\n}\n")
	lines := strings.Split(body, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "\t")
	}
	want := "```go\n" + strings.Join(lines, "\n") + "\n```"
	if !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not show ExampleWithTreeLimits verbatim; it should contain:\n%s", want)
	}
}
