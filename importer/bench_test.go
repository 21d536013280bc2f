package importer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// chatSnippets are the pieces the benchmark's messages are cut from: code,
// shell output and prose as coding agents read and write them, full of what
// a JSON encoder escapes (newlines, tabs, quotes, backslashes) and of
// non-ASCII text.
var chatSnippets = []string{
	"func (s *Server) handle(w http.ResponseWriter, r *http.Request) {\n\tif r.Method != \"POST\" {\n\t\thttp.Error(w, \"method not allowed\", 405)\n\t\treturn\n\t}\n",
	"\tre := regexp.MustCompile(`^(\\d+)\\s*-\\s*(\\w+)$`)\n\tpath := \"C:\\\\Users\\\\dev\\\\go\\\\src\"\n",
	"$ go test ./...\n--- FAIL: TestParse (0.00s)\n    parse_test.go:42: got \"a\\tb\", want \"a b\"\nFAIL\n",
	"Le résultat attendu était « 42 » — voilà pourquoi le test échoue → à corriger.\n",
	"print(f\"Processing {len(items)} items… ✓ done\")  # naïve café\n",
	"SELECT \"id\", \"name\" FROM users WHERE email LIKE '%@example.org' AND note <> '\\\\n';\n",
	"Traceback (most recent call last):\n  File \"/srv/app/main.py\", line 17, in <module>\n    raise ValueError(\"bad input\")\n",
}

func chatText(seed, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "step %d:\n", seed)
	for i := seed; b.Len() < n; i++ {
		b.WriteString(chatSnippets[i*5%len(chatSnippets)])
	}
	return b.String()
}

// chatJSONL returns at least size bytes of openai-chat JSON Lines, one run
// per line, shaped like a coding agent's: a system and a task message,
// then turns of an assistant message (about 1 KiB of prose and code, with
// usage) calling a tool whose arguments carry about 1 KiB of code, and
// the tool's result of about 1 KiB.
func chatJSONL(size int) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for run := 0; buf.Len() < size; run++ {
		msgs := []map[string]any{
			{"role": "system", "content": "You are a coding agent. Use the tools to change the repository."},
			{"role": "user", "content": chatText(run, 512)},
		}
		for turn := range 12 {
			id := fmt.Sprintf("call_%d_%d", run, turn)
			args, _ := json.Marshal(map[string]any{"path": fmt.Sprintf("src/pkg%d/file.go", turn), "content": chatText(run+turn, 1024)})
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": chatText(run*13+turn, 1024), "model": "gpt-4o-2024-08-06",
					"usage":      map[string]int{"prompt_tokens": 9000 + turn, "completion_tokens": 300 + turn},
					"tool_calls": []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "write_file", "arguments": string(args)}}}},
				map[string]any{"role": "tool", "tool_call_id": id, "content": chatText(run+turn*7, 1024)})
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": "Done: the tests pass."})
		if err := enc.Encode(map[string]any{"instance_id": fmt.Sprintf("task-%d", run), "messages": msgs}); err != nil {
			panic(err)
		}
	}
	return buf.Bytes()
}

// chatCorpus holds the generated files by size: the harness calls a
// benchmark several times, and 80 MB takes a while to generate.
var chatCorpus = map[int][]byte{}

func benchmarkImportOpenAIChat(b *testing.B, size int) {
	data, ok := chatCorpus[size]
	if !ok {
		data = chatJSONL(size)
		chatCorpus[size] = data
	}
	events := 0
	out := &Output{Emit: func(r Run) error { events += len(r.Events); return nil }}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPUTime()
	for range b.N {
		if err := Import("openai-chat", "bench.jsonl", bytes.NewReader(data), Options{IDField: "instance_id"}, out); err != nil {
			b.Fatal(err)
		}
	}
	// The process's CPU time (GC workers included): MB/s per core even on
	// a machine whose other work stretches the wall-clock time.
	if cpu := processCPUTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(len(data))*float64(b.N)/1e6/cpu.Seconds(), "MB/cpu-s")
	}
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
}

// BenchmarkImportOpenAIChat10MB and BenchmarkImportOpenAIChat80MB measure
// §6's import figure: MB/s of openai-chat JSON Lines mapped to events
// (not written), and the 80/10 ratio of their times, which must stay ≤ 10.
func BenchmarkImportOpenAIChat10MB(b *testing.B) { benchmarkImportOpenAIChat(b, 10<<20) }

func BenchmarkImportOpenAIChat80MB(b *testing.B) { benchmarkImportOpenAIChat(b, 80<<20) }
