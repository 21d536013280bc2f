// Package benchlog generates the event logs the benchmarks of codec,
// replay and termination read: ReAct (short events of a ReAct loop) and
// RealSized (about 1 KiB of code-like content an event), and Policy, which
// evaluates every condition on them and fires none.
package benchlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Start is the time of every log's first event.
var Start = time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)

// ReAct is a generated JSON Lines log of n events shaped like a ReAct run:
// message, tool_call, tool_result, with usage, cost and times.
func ReAct(n int) []byte {
	var buf bytes.Buffer
	tools := []string{"web_search", "fetch_page", "calculator"}
	for i := 0; i < n; i++ {
		ts := Start.Add(time.Duration(i) * 1500 * time.Millisecond).Format(time.RFC3339Nano)
		tool := tools[i/3%len(tools)]
		switch i % 3 {
		case 0:
			fmt.Fprintf(&buf, `{"kind":"message","source":"assistant","model":"gpt-5","text":"Step %d: I will use %s to check the next fact.","usage":{"input_tokens":%d,"output_tokens":%d},"cost":0.0012,"time":%q}`+"\n",
				i/3, tool, 900+i%97, 40+i%13, ts)
		case 1:
			fmt.Fprintf(&buf, `{"kind":"tool_call","source":"assistant","tool":%q,"call_id":"call_%d","args":{"query":"fact number %d","limit":5,"lang":["en","fr"]},"time":%q}`+"\n",
				tool, i/3, i/3, ts)
		default:
			fmt.Fprintf(&buf, `{"kind":"tool_result","source":%q,"tool":%q,"call_id":"call_%d","text":"Result for fact %d: 42 (source: example.org)","time":%q}`+"\n",
				tool, tool, i/3, i/3, ts)
		}
	}
	return buf.Bytes()
}

// Policy never fires on ReAct and RealSized logs, so every event is decoded and
// evaluated by every condition.
const Policy = `
max_iterations: {limit: 100000, pressure: 0.8}
max_tool_calls: {limit: 100000, pressure: 0.8, per_tool: {search: 100000}}
timeout: 1000h
token_budget: {total: 1000000000, pressure: 0.8, grace: 1}
cost_budget: {limit: 1000000, pressure: 0.9}
stall: {repeats: 3, window: 8, warn_at: 2, cycle: 3, token_tolerance: 0.0001}
errors: {consecutive: 3, total: 100}
text_mention: {text: TERMINATE, sources: [critic]}
function_call: [approve]
handoff: [user]
source_match: [critic]
stop_message: true
`

// realSizedSnippets are the pieces the real-sized corpus is cut from: code,
// shell output and prose as coding agents read and write them, full of what
// a JSON encoder must escape (newlines, tabs, quotes, backslashes) and of
// non-ASCII text.
var realSizedSnippets = []string{
	"func (s *Server) handle(w http.ResponseWriter, r *http.Request) {\n\tif r.Method != \"POST\" {\n\t\thttp.Error(w, \"method not allowed\", 405)\n\t\treturn\n\t}\n",
	"\tre := regexp.MustCompile(`^(\\d+)\\s*-\\s*(\\w+)$`)\n\tpath := \"C:\\\\Users\\\\dev\\\\go\\\\src\"\n",
	"$ go test ./...\n--- FAIL: TestParse (0.00s)\n    parse_test.go:42: got \"a\\tb\", want \"a b\"\nFAIL\n",
	"Le résultat attendu était « 42 » — voilà pourquoi le test échoue → à corriger.\n",
	"// 日本語のコメント: この関数は入力を検証します。\n",
	"print(f\"Processing {len(items)} items… ✓ done\")  # naïve café\n",
	"\tlog.Printf(\"user=%q status=%d\\n\", u.Name, code)\n",
	"SELECT \"id\", \"name\" FROM users WHERE email LIKE '%@example.org' AND note <> '\\\\n';\n",
	"Traceback (most recent call last):\n  File \"/srv/app/main.py\", line 17, in <module>\n    raise ValueError(\"bad input: \\x00\")\n",
	"    <div class=\"alert\">Ошибка: файл не найден</div>\n",
}

// realSizedText returns about n bytes of code-like text, different for
// every seed.
func realSizedText(seed, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "step %d:\n", seed)
	for i := seed; b.Len() < n; i++ {
		b.WriteString(realSizedSnippets[i*7%len(realSizedSnippets)])
	}
	return b.String()
}

// RealSized is a JSON Lines log of n events shaped like a coding agent's
// run: a message of about 1 KiB of prose and code, a tool call whose args
// carry about 1 KiB of code, and the tool's output of about 1 KiB, each
// encoded by encoding/json (which also escapes <, > and &). Every third
// message is encoded as Python's json.dumps does by default, with non-ASCII
// as \u escapes. No condition of Policy fires on it.
func RealSized(n int) []byte {
	var buf bytes.Buffer
	tools := []string{"write_file", "run_tests", "read_file"}
	for i := range n {
		ts := Start.Add(time.Duration(i) * 1500 * time.Millisecond).Format(time.RFC3339Nano)
		tool := tools[i/3%len(tools)]
		var line []byte
		switch i % 3 {
		case 0:
			line = marshalEvent(map[string]any{"kind": "message", "source": "assistant", "model": "gpt-5",
				"text":  realSizedText(i, 1024),
				"usage": map[string]int{"input_tokens": 9000 + i%97, "output_tokens": 300 + i%13}, "cost": 0.0012, "time": ts})
			if i%9 == 0 {
				line = asciiEscaped(line)
			}
		case 1:
			line = marshalEvent(map[string]any{"kind": "tool_call", "source": "assistant", "tool": tool, "call_id": fmt.Sprintf("call_%d", i/3),
				"args": map[string]any{"path": fmt.Sprintf("src/pkg%d/file.go", i/3), "content": realSizedText(i, 1024), "overwrite": true, "mode": 420},
				"time": ts})
		default:
			line = marshalEvent(map[string]any{"kind": "tool_result", "source": tool, "tool": tool, "call_id": fmt.Sprintf("call_%d", i/3),
				"text": realSizedText(i+5, 1024), "time": ts})
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

func marshalEvent(v map[string]any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// asciiEscaped re-encodes the non-ASCII runes of a JSON text as \u escapes
// (surrogate pairs beyond the BMP), as Python's json.dumps does.
func asciiEscaped(b []byte) []byte {
	var out bytes.Buffer
	for _, r := range string(b) {
		switch {
		case r < 0x80:
			out.WriteRune(r)
		case r > 0xFFFF:
			r -= 0x10000
			fmt.Fprintf(&out, `\u%04x\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
		default:
			fmt.Fprintf(&out, `\u%04x`, r)
		}
	}
	return out.Bytes()
}
