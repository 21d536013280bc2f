package termination

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

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

// realSizedLog is a JSON Lines log of n events shaped like a coding agent's
// run: a message of about 1 KiB of prose and code, a tool call whose args
// carry about 1 KiB of code, and the tool's output of about 1 KiB, each
// encoded by encoding/json (which also escapes <, > and &). Every third
// message is encoded as Python's json.dumps does by default, with non-ASCII
// as \u escapes. No condition of benchPolicy fires on it.
func realSizedLog(n int) []byte {
	var buf bytes.Buffer
	tools := []string{"write_file", "run_tests", "read_file"}
	for i := range n {
		ts := t0.Add(time.Duration(i) * 1500 * time.Millisecond).Format(time.RFC3339Nano)
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

const realSizedEvents = 3000

// BenchmarkReplayRealSized is replay (decode and evaluate, the full policy
// with text_mention) of real-sized events: about 1 KiB of code-like text or
// args each, escapes and non-ASCII included. It reports MB/s (contract §6:
// at least 400 per core) and events/s.
func BenchmarkReplayRealSized(b *testing.B) {
	benchReplay(b, realSizedLog(realSizedEvents), realSizedEvents)
}

// TestRealSizedLog: the corpus is what the benchmark says: about 1 KiB of
// text or args an event, with escapes and non-ASCII, decoded as written,
// and no condition fires on it.
func TestRealSizedLog(t *testing.T) {
	log := realSizedLog(300)
	lines := bytes.Split(bytes.TrimSuffix(log, []byte("\n")), []byte("\n"))
	if len(lines) != 300 {
		t.Fatalf("%d lines", len(lines))
	}
	if avg := len(log) / len(lines); avg < 1024 || avg > 2048 {
		t.Errorf("%d bytes an event, want about 1 KiB of content each", avg)
	}
	for _, esc := range []string{`\n`, `\t`, `\"`, `\\`, `\u003c`, `\u00e9`, "é", "日本語"} {
		if !bytes.Contains(log, []byte(esc)) {
			t.Errorf("the corpus has no %s", esc)
		}
	}
	d := NewDecoder(bytes.NewReader(log))
	for i := range 3 {
		ev, err := d.Next()
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		if err := json.Unmarshal(lines[i], &want); err != nil {
			t.Fatal(err)
		}
		switch ev.Kind {
		case KindMessage, KindToolResult:
			if ev.Text != want["text"] || len(ev.Text) < 1024 {
				t.Errorf("event %d: text decoded as %q", i+1, ev.Text)
			}
		case KindToolCall:
			var args map[string]any
			if err := json.Unmarshal(ev.Args, &args); err != nil || args["content"] != want["args"].(map[string]any)["content"] {
				t.Errorf("event %d: args decoded as %s", i+1, ev.Args)
			}
		}
	}
	res, err := Replay(MustParsePolicy(benchPolicy).Condition(), bytes.NewReader(log))
	if err != nil || res.Events != 300 || res.StoppedAt != 0 {
		t.Fatalf("replay: %v, %d events, stopped at %d (%v)", err, res.Events, res.StoppedAt, res.Cause)
	}
}

// TestReplayHashesArgsWhileDecoding: replay hashes tool calls' args from
// the raw bytes as it decodes them; canonically equal args still match
// whatever their escapes, key order and number forms, including args the
// decoder leaves to be hashed later (duplicate keys).
func TestReplayHashesArgsWhileDecoding(t *testing.T) {
	cond := MustParsePolicy("stall: {repeats: 4}").Condition()
	log := `{"kind":"tool_call","tool":"grep","args":{"q":"é\n","n":1}}
{"kind":"tool_call","tool":"grep","args":{"n":1.0,"q":"\u00e9\u000a"}}
{"kind":"tool_call","tool":"grep","args":{ "q" : "\u00E9\n" , "n" : 1e0 }}
{"kind":"tool_call","tool":"grep","args":{"q":"x","n":1,"q":"é\n"}}
`
	res, err := Replay(cond, strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if res.StoppedAt != 4 || res.Tag() != TagStall {
		t.Fatalf("stopped at %d with %v, want a stall at 4", res.StoppedAt, res.Cause)
	}
	different := strings.Replace(log, `"q":"é\n"}}`, `"q":"e\n"}}`, 1)
	if res, err := Replay(cond, strings.NewReader(different)); err != nil || res.StoppedAt != 0 {
		t.Fatalf("different args: stopped at %d with %v (%v)", res.StoppedAt, res.Cause, err)
	}
}
