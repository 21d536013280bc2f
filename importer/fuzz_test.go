package importer

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// inUsersTerms are the formats whose errors are checked never to name a
// Go type.
var inUsersTerms = map[string]bool{"openai-chat": true, "mini-swe-agent": true, "swe-agent": true}

// FuzzImport feeds every format arbitrary bytes: an import either maps
// them or fails with a one-line error; it never panics, and what it maps
// is made of valid events.
func FuzzImport(f *testing.F) {
	for _, name := range []string{"chat.json", "batch.jsonl", "django__django-11099.traj.json", "collector.jsonl",
		"mini-swe-agent-1-local.traj.json", "mini-swe-agent-2-toolcall.traj.json", "function_calling_simple.traj",
		"micro-swe-agent-1.0-github_issue.traj.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`[{"role":"tool","tool_call_id":"x"}]`))
	f.Add([]byte(`{"messages":[{"role":"assistant","content":"` + "```bash\\ncd a && timeout 5 python3 -m x\\n```" + `"}]}`))
	// mini-swe-agent 2.x: a tool call, its result, a format error, an exit.
	f.Add([]byte(`[{"role":"user","content":"t"},{"role":"assistant","content":"","tool_calls":[{"id":"c","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]},` +
		`{"role":"tool","tool_call_id":"c","content":"x","extra":{"returncode":1,"raw_output":"x","timestamp":1.5}},` +
		`{"role":"user","content":"<error>no</error>","extra":{"interrupt_type":"FormatError","cost":0.1,"response":{"created":1,"usage":{"prompt_tokens":3}}}},` +
		`{"role":"exit","content":"","extra":{"exit_status":"Submitted"}}]`))
	// SWE-agent: tool_call_ids, a demonstration, a text action, a submit.
	f.Add([]byte(`{"history":[{"role":"user","content":"d","is_demo":true},{"role":"assistant","content":"a","action":"ls"},{"role":"user","content":"o"},` +
		`{"role":"assistant","content":"b","tool_calls":[{"id":"s","function":{"name":"submit","arguments":"{}"}}]},{"role":"tool","content":"p","tool_call_ids":["s"]}],` +
		`"trajectory":[{"action":"ls"},{"action":"submit"}],"info":{"exit_status":"exit_cost"}}`))
	// Claude Code: a compaction (its boundary, its summary) and a reply.
	f.Add([]byte(`{"type":"system","subtype":"compact_boundary","sessionId":"s","compactMetadata":{"trigger":"auto"}}` + "\n" +
		`{"type":"user","sessionId":"s","isCompactSummary":true,"message":{"role":"user","content":"summary"}}` + "\n" +
		`{"type":"assistant","sessionId":"s","message":{"id":"m","content":[{"type":"text","text":"ok"}]}}` + "\n"))
	// openai-chat JSON Lines with a content part list and a long line.
	f.Add([]byte("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"},{\"type\":\"text\",\"text\":\"x\"}]}]}\n\n{\"messages\":[]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, format := range Formats() {
			for _, opts := range []Options{{}, {MessagesField: "traj", IDField: "id", ErrorPrefix: "E"}} {
				runs, err := importData(format, "f.json", data, opts)
				if err != nil {
					if strings.Contains(err.Error(), "\n") {
						t.Fatalf("%s: a multi-line error: %q", format, err)
					}
					if inUsersTerms[format] && (strings.Contains(err.Error(), "Go ") || strings.Contains(err.Error(), "importer.")) {
						t.Fatalf("%s: an error that names a Go type: %q", format, err)
					}
					continue
				}
				for _, r := range runs {
					for i, ev := range r.Events {
						if err := ev.Validate(); err != nil {
							t.Fatalf("%s: run %s event %d: %v", format, r.ID, i, err)
						}
					}
				}
			}
		}
	})
}

// FuzzToolName: naming a command's tool never panics.
func FuzzToolName(f *testing.F) {
	for _, s := range []string{"cd /x && timeout -s KILL 5 FOO='a b' python3 -m pytest", `"a\`, "cd", "timeout", "x;&&;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cmd string) { _ = toolName(cmd) })
}

// FuzzOpenAIChatPaths: a JSON Lines line maps the same through the
// one-pass decode as through the slow path that names what is wrong: the
// same run, or an error from both.
func FuzzOpenAIChatPaths(f *testing.F) {
	f.Add([]byte(`{"id": "a", "messages": [{"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "image"}]}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c", "content": "ok"}]}`))
	f.Add([]byte(`{"ID": 7, "Messages": [{"role": "assistant", "content": "x", "usage": {"prompt_tokens": 3}, "function_call": {"name": "g", "arguments": "no"}}]}`))
	f.Add([]byte(`{"id": null, "messages": [{"role": "assistant", "tool_calls": "x"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if bytes.ContainsAny(data, "\r\n") {
			return
		}
		run := func(fast bool) (runs []Run, skipped []Skipped, err error) {
			out := &Output{Emit: func(r Run) error { runs = append(runs, r); return nil }}
			c := newChatStream("f.jsonl", &Options{IDField: "id", ErrorPrefix: "E"}, out)
			if !fast {
				c.fast = nil
			}
			err = c.value(data, "")
			return runs, out.Skipped(), err
		}
		fastRuns, fastSkipped, fastErr := run(true)
		slowRuns, slowSkipped, slowErr := run(false)
		if (fastErr == nil) != (slowErr == nil) {
			t.Fatalf("one-pass: %v; slow path: %v", fastErr, slowErr)
		}
		if fastErr == nil && (!reflect.DeepEqual(fastRuns, slowRuns) || !reflect.DeepEqual(fastSkipped, slowSkipped)) {
			t.Fatalf("one-pass: %+v %v; slow path: %+v %v", fastRuns, fastSkipped, slowRuns, slowSkipped)
		}
	})
}
