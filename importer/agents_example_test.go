package importer_test

import (
	"fmt"
	"strings"

	"github.com/agentstop/agentstop/importer"
)

// A Claude Code session whose Task tool ran a sub-agent: the sidechain is
// a child run of the session's run, the reply's usage counts the cached
// input, and the file-history line is counted, not mapped.
func ExampleImport_claudeCode() {
	session := `{"type":"user","sessionId":"s1","timestamp":"2025-11-19T22:53:30Z","message":{"content":"Find the bug"}}
{"type":"assistant","sessionId":"s1","timestamp":"2025-11-19T22:53:31Z","message":{"id":"m1","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"t1","name":"Task","input":{"prompt":"search"}}],"usage":{"input_tokens":3,"cache_read_input_tokens":1000,"output_tokens":20}}}
{"type":"assistant","sessionId":"s1","isSidechain":true,"agentId":"a7","timestamp":"2025-11-19T22:53:32Z","message":{"id":"m2","content":[{"type":"text","text":"found it"}],"usage":{"input_tokens":5,"output_tokens":4}}}
{"type":"user","sessionId":"s1","timestamp":"2025-11-19T22:53:33Z","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"found it"}]}}
{"type":"assistant","sessionId":"s1","timestamp":"2025-11-19T22:53:34Z","message":{"id":"m3","content":[{"type":"text","text":"Fixed."}],"usage":{"input_tokens":10,"output_tokens":3}}}
{"type":"file-history-snapshot","messageId":"x","snapshot":{}}
`
	out := &importer.Output{Emit: func(r importer.Run) error {
		fmt.Printf("run %s, parent %q:", r.ID, r.Parent)
		for _, ev := range r.Events {
			fmt.Printf(" %s", ev.Kind)
			if ev.Usage.InputTokens > 0 {
				fmt.Printf("(%d in)", ev.Usage.InputTokens)
			}
		}
		fmt.Println()
		return nil
	}}
	if err := importer.Import("claude-code", "s1.jsonl", strings.NewReader(session), importer.Options{}, out); err != nil {
		fmt.Println(err)
	}
	fmt.Println(out.Skipped())
	// Output:
	// run s1, parent "": input message(1003 in) tool_call tool_result final(10 in)
	// run s1/agent-a7, parent "s1": final(5 in)
	// [{file-history-snapshot 1}]
}
