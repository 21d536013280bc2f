package importer_test

import (
	"fmt"

	"github.com/agentstop/agentstop/importer"
)

// How a mini-swe-agent action's tool is named.
func ExampleToolName() {
	for _, cmd := range []string{
		"cd /testbed && grep -rn UsernameValidator django/",
		"PYTHONPATH=. python -m pytest tests/ -q",
		"timeout 60 /usr/bin/python3 -m unittest discover",
	} {
		fmt.Println(importer.ToolName(cmd))
	}
	// Output:
	// grep
	// pytest
	// unittest
}
