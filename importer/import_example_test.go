package importer_test

import (
	"fmt"
	"strings"

	"github.com/agentstop/agentstop/importer"
)

// Import hands each run to an Output as soon as the format completes it
// (a JSON Lines file of chat runs: one per line) and counts what the
// format leaves out.
func ExampleImport() {
	jsonl := `{"id": "task-1", "messages": [{"role": "user", "content": [{"type": "text", "text": "Fix it"}, {"type": "image_url", "image_url": {"url": "data:,"}}]}, {"role": "assistant", "content": "Fixed."}]}
{"id": "task-2", "messages": [{"role": "user", "content": "Test it"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "run_tests", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "ok"}, {"role": "assistant", "content": "All pass."}]}
`
	out := &importer.Output{Emit: func(r importer.Run) error {
		var kinds []string
		for _, ev := range r.Events {
			kinds = append(kinds, ev.Kind.String())
		}
		fmt.Println(r.ID, strings.Join(kinds, " "))
		return nil
	}}
	err := importer.Import("openai-chat", "runs.jsonl", strings.NewReader(jsonl), importer.Options{IDField: "id"}, out)
	fmt.Println(err, out.Skipped())
	// Output:
	// task-1 input final
	// task-2 input message tool_call tool_result final
	// <nil> [{non-text content part 1}]
}
