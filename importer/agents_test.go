package importer

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/termination"
)

// TestAgentImportGolden imports each agent session of testdata/ (Claude
// Code, Codex, Gemini CLI) and compares the stream with its golden file,
// then checks that every line decodes as a §1 event.
func TestAgentImportGolden(t *testing.T) {
	tests := []struct {
		format, file, golden string
	}{
		{"claude-code", "claude-code-session.jsonl", "claude-code-session.golden.jsonl"},
		{"claude-code", "agent-showcol1.jsonl", "agent-showcol1.golden.jsonl"},
		{"claude-code", "claude-code-compact.jsonl", "claude-code-compact.golden.jsonl"},
		{"codex", "codex-rollout.jsonl", "codex-rollout.golden.jsonl"},
		{"codex", "codex-legacy.jsonl", "codex-legacy.golden.jsonl"},
		{"codex", "codex-0125.jsonl", "codex-0125.golden.jsonl"},
		{"gemini-cli", "gemini-session.json", "gemini-session.golden.jsonl"},
		{"gemini-cli", "gemini-session.jsonl", "gemini-session.golden.jsonl"},
		{"gemini-cli", "gemini-3-pro-session.json", "gemini-3-pro-session.golden.jsonl"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			runs, err := importPath(tt.format, filepath.Join("testdata", tt.file), Options{})
			require.NoError(t, err)
			var b bytes.Buffer
			require.NoError(t, Runs(runs).WriteStream(&b))
			golden := filepath.Join("testdata", tt.golden)
			if *update {
				require.NoError(t, os.WriteFile(golden, b.Bytes(), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			assert.Equal(t, string(want), b.String())
			dec := codec.NewDecoder(bytes.NewReader(b.Bytes()))
			for {
				_, err := dec.Next()
				if err != nil {
					require.ErrorContains(t, err, "EOF")
					break
				}
			}
		})
	}
}

// importOut imports data and returns its runs and what was skipped.
func importOut(t *testing.T, format, file, data string) ([]Run, map[string]int) {
	t.Helper()
	var runs []Run
	out := &Output{Emit: func(r Run) error { runs = append(runs, r); return nil }}
	require.NoError(t, Import(format, file, bytes.NewReader([]byte(data)), Options{}, out))
	skipped := map[string]int{}
	for _, s := range out.Skipped() {
		skipped[s.Kind] = s.Count
	}
	return runs, skipped
}

// kinds lists a run's events as "kind tool (error)".
func kinds(r Run) []string {
	var got []string
	for _, e := range r.Events {
		s := e.Kind.String()
		if e.Tool != "" {
			s += " " + e.Tool
		}
		if e.Err != "" {
			s += " (" + e.Err + ")"
		}
		got = append(got, s)
	}
	return got
}

func TestClaudeCodeMapping(t *testing.T) {
	data, err := os.ReadFile("testdata/claude-code-session.jsonl")
	require.NoError(t, err)
	runs, skipped := importOut(t, "claude-code", "s.jsonl", string(data))
	require.Len(t, runs, 2)
	main, sub := runs[0], runs[1]
	const session = "88a8d761-7b9a-4bf1-a8ca-c1febe6bf358"
	assert.Equal(t, session, main.ID)
	assert.Empty(t, main.Parent)
	assert.Equal(t, session+"/agent-e1c84ba5", sub.ID, "a sidechain that starts without agentId is named by the first agentId of its lines")
	assert.Equal(t, session, sub.Parent)
	assert.Equal(t, []string{
		"input", "message", "tool_call Task", "tool_result Task",
		"message", "tool_call Edit", "tool_result Edit (<tool_use_error>String to replace not found in file.</tool_use_error>)",
		"final",
	}, kinds(main))
	assert.Equal(t, []string{"message", "tool_call Grep", "tool_result Grep", "message", "tool_call Read", "tool_result Read", "final"}, kinds(sub))
	assert.Equal(t, termination.Usage{InputTokens: 3 + 141272, OutputTokens: 365}, main.Events[1].Usage,
		"a reply written over two lines is counted once, cache writes added to input")
	assert.Equal(t, termination.Usage{InputTokens: 3 + 2952 + 141272, OutputTokens: 190}, main.Events[4].Usage, "cache reads and writes are input")
	assert.Equal(t, "Excellent research! The sub-assistant has identifi...", main.Events[4].Text, "a reply's text blocks, not its thinking")
	assert.Empty(t, main.Events[1].Text, "thinking is not text")
	assert.Equal(t, "claude-sonnet-4-5-20250929", main.Events[1].Model)
	assert.Equal(t, "toolu_01JA2mLseQCAW3MdwPE4qWEk", main.Events[2].CallID)
	assert.Equal(t, main.Events[2].CallID, main.Events[3].CallID)
	assert.Equal(t, map[string]int{"summary": 1, "file-history-snapshot": 1, "system": 1}, skipped)

	// A sub-agent's file on its own: the parent comes from its sessionId.
	data, err = os.ReadFile("testdata/agent-showcol1.jsonl")
	require.NoError(t, err)
	runs, _ = importOut(t, "claude-code", "agent-showcol1.jsonl", string(data))
	require.Len(t, runs, 1)
	assert.Equal(t, "55550000-0000-4000-8000-000000000001/agent-showcol1", runs[0].ID)
	assert.Equal(t, "55550000-0000-4000-8000-000000000001", runs[0].Parent)
}

func TestClaudeCodeRules(t *testing.T) {
	const u = `"type":"user","sessionId":"s"`
	const a = `"type":"assistant","sessionId":"s"`
	tests := []struct {
		name, data string
		want       map[string][]string // run → kinds
		skipped    map[string]int
		check      func(t *testing.T, runs []Run)
	}{
		{
			name: "sidechains without agentId follow parentUuid",
			data: `{` + u + `,"uuid":"u1","message":{"role":"user","content":"go"}}
{` + a + `,"uuid":"x1","isSidechain":true,"parentUuid":null,"message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Grep","input":{}}]}}
{` + u + `,"uuid":"x2","isSidechain":true,"parentUuid":"x1","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}}
{` + a + `,"uuid":"y1","isSidechain":true,"parentUuid":null,"message":{"id":"m2","content":[{"type":"text","text":"other"}]}}
{` + a + `,"uuid":"x3","isSidechain":true,"parentUuid":"x2","message":{"id":"m3","content":[{"type":"text","text":"done"}]}}
`,
			want: map[string][]string{"s": {"input"}, "s/sidechain-x1": {"message", "tool_call Grep", "tool_result Grep", "final"}, "s/sidechain-y1": {"final"}},
		},
		{
			name: "a run that ends on a tool call has no final",
			data: `{` + a + `,"message":{"id":"m1","content":[{"type":"text","text":"a"}]}}
{` + a + `,"message":{"id":"m2","content":[{"type":"tool_use","id":"t","name":"Bash","input":{"command":"ls"}}]}}
`,
			want: map[string][]string{"s": {"message", "message", "tool_call Bash"}},
		},
		{
			name: "usage once per message.id, the largest count of its lines",
			data: `{` + a + `,"message":{"id":"m1","content":[{"type":"text","text":"a"}],"usage":{"input_tokens":5,"cache_read_input_tokens":100,"output_tokens":1}}}
{` + a + `,"message":{"id":"m1","content":[{"type":"text","text":"b"}],"usage":{"input_tokens":5,"cache_read_input_tokens":100,"output_tokens":30}}}
`,
			want: map[string][]string{"s": {"final"}},
			check: func(t *testing.T, runs []Run) {
				assert.Equal(t, termination.Usage{InputTokens: 105, OutputTokens: 30}, runs[0].Events[0].Usage)
				assert.Equal(t, "a\nb", runs[0].Events[0].Text)
			},
		},
		{
			name: "API errors, synthetic replies, meta text and images",
			data: `{` + u + `,"isMeta":true,"message":{"content":"<local-command-caveat>x</local-command-caveat>"}}
{` + u + `,"message":{"content":[{"type":"image","source":{}},{"type":"text","text":"what is this?"}]}}
{` + a + `,"isApiErrorMessage":true,"message":{"id":"e","model":"<synthetic>","content":[{"type":"text","text":"API Error: 529 overloaded"}]}}
{` + a + `,"message":{"id":"n","model":"<synthetic>","content":[{"type":"text","text":"No response requested."}]}}
{"type":"progress","sessionId":"s"}
`,
			want:    map[string][]string{"s": {"input", "input", "error (API Error: 529 overloaded)"}},
			skipped: map[string]int{"image in a user message": 1, "synthetic assistant message": 1, "progress": 1},
			check: func(t *testing.T, runs []Run) {
				assert.Equal(t, "system", runs[0].Events[0].Source, "isMeta text is Claude Code's, not the user's")
				assert.Equal(t, "user", runs[0].Events[1].Source)
			},
		},
		{
			name: "a compaction: its boundary is skipped, its summary is Claude Code's text",
			data: `{"type":"system","subtype":"compact_boundary","sessionId":"s","content":"Conversation compacted","compactMetadata":{"trigger":"auto","preTokens":155979}}
{` + u + `,"isCompactSummary":true,"isVisibleInTranscriptOnly":true,"message":{"content":"This session is being continued from a previous conversation that ran out of context."}}
{` + u + `,"message":{"content":"go on"}}
`,
			want:    map[string][]string{"s": {"input", "input"}},
			skipped: map[string]int{"system": 1},
			check: func(t *testing.T, runs []Run) {
				assert.Equal(t, "system", runs[0].Events[0].Source, "the compaction summary is Claude Code's, not the user's")
				assert.Equal(t, "user", runs[0].Events[1].Source)
			},
		},
		{
			name: "no sessionId: the run is named after the file",
			data: `{"type":"user","message":{"content":"hi"}}` + "\n",
			want: map[string][]string{"f": {"input"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runs, skipped := importOut(t, "claude-code", "dir/f.jsonl", tt.data)
			got := map[string][]string{}
			for _, r := range runs {
				got[r.ID] = kinds(r)
				if r.ID != "s" && r.ID != "f" {
					assert.Equal(t, "s", r.Parent, r.ID)
				}
			}
			assert.Equal(t, tt.want, got)
			if tt.skipped == nil {
				tt.skipped = map[string]int{}
			}
			assert.Equal(t, tt.skipped, skipped)
			if tt.check != nil {
				tt.check(t, runs)
			}
		})
	}
}

func TestCodexMapping(t *testing.T) {
	data, err := os.ReadFile("testdata/codex-rollout.jsonl")
	require.NoError(t, err)
	runs, skipped := importOut(t, "codex", "rollout.jsonl", string(data))
	require.Len(t, runs, 1)
	r := runs[0]
	assert.Equal(t, "0199a213-81c0-7800-8aa1-bbab2a035a53", r.ID, "named by session_meta")
	assert.Equal(t, []string{
		"input", "input",
		"message", "tool_call shell", "tool_result shell (exit code 1)",
		"message", "tool_call apply_patch", "tool_result apply_patch",
		"message", "tool_call shell", "tool_result shell",
		"final",
	}, kinds(r))
	var sum termination.Usage
	for _, e := range r.Events {
		sum = addUsage(sum, e.Usage)
	}
	assert.Equal(t, termination.Usage{InputTokens: 23150, OutputTokens: 688}, sum, "the deltas add up to the last running total (a repeated token_count counts once)")
	assert.Equal(t, termination.Usage{InputTokens: 5210, OutputTokens: 312}, r.Events[2].Usage, "the first total is the first turn's")
	assert.Equal(t, termination.Usage{InputTokens: 11030 - 5210, OutputTokens: 540 - 312}, r.Events[5].Usage)
	assert.Equal(t, "gpt-5-codex", r.Events[2].Model, "model from turn_context")
	assert.Equal(t, "The parser drops the timezone; patching it.", r.Events[5].Text)
	assert.Equal(t, map[string]int{"event_msg user_message": 1, "event_msg agent_message": 2, "event_msg agent_reasoning": 1, "event_msg token_count without usage": 1}, skipped)
}

func TestCodexRules(t *testing.T) {
	line := func(typ, payload string) string {
		return `{"timestamp":"2025-10-06T14:00:00Z","type":"` + typ + `","payload":` + payload + "}\n"
	}
	tc := func(in, out int) string {
		return line("event_msg", `{"type":"token_count","info":{"total_token_usage":{"input_tokens":`+strconv.Itoa(in)+`,"output_tokens":`+strconv.Itoa(out)+`}}}`)
	}
	say := func(text string) string {
		return line("response_item", `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"`+text+`"}]}`)
	}
	tests := []struct {
		name, data string
		want       []string
		usage      []termination.Usage // of the model turns, in order
		parent     string
		skipped    map[string]int
	}{
		{
			name:  "a running total that falls counts from zero",
			data:  say("a") + tc(100, 10) + say("b") + tc(40, 4),
			want:  []string{"message", "final"},
			usage: []termination.Usage{{InputTokens: 100, OutputTokens: 10}, {InputTokens: 40, OutputTokens: 4}},
		},
		{
			name:  "usage that closes no turn goes on the next one",
			data:  tc(50, 5) + say("a") + tc(80, 9),
			want:  []string{"final"},
			usage: []termination.Usage{{InputTokens: 80, OutputTokens: 9}},
		},
		{
			name:    "usage with no model turn at all is counted",
			data:    line("response_item", `{"type":"message","role":"user","content":"hi"}`) + tc(50, 5),
			want:    []string{"input"},
			skipped: map[string]int{"token usage with no model turn": 1},
		},
		{
			name: "outputs: success false, exit codes, web search",
			data: line("response_item", `{"type":"function_call","name":"mcp__x","arguments":"{}","call_id":"c1"}`) +
				line("response_item", `{"type":"function_call_output","call_id":"c1","output":{"content":"denied","success":false}}`) +
				line("response_item", `{"type":"local_shell_call","call_id":"c2","status":"completed","action":{"type":"exec","command":["ls"]}}`) +
				line("response_item", `{"type":"function_call_output","call_id":"c2","output":"Chunk ID: 1\nProcess exited with code 2\nOutput:\nExit code: 0\n"}`) +
				line("response_item", `{"type":"web_search_call","id":"ws1","status":"failed","action":{"type":"search","query":"x"}}`) +
				line("response_item", `{"type":"ghost_snapshot","ghost_commit":{}}`) +
				line("compacted", `{"message":"summary"}`),
			want:    []string{"message", "tool_call mcp__x", "tool_result mcp__x (denied)", "message", "tool_call local_shell", "tool_result local_shell (exit code 2)", "message", "tool_call web_search", "tool_result web_search (web search failed)"},
			skipped: map[string]int{"response_item ghost_snapshot": 1, "compacted": 1},
		},
		{
			name:   "a sub-agent's session names its parent thread",
			data:   line("session_meta", `{"id":"child","source":{"subagent":{"thread_spawn":{"parent_thread_id":"root","depth":1}}}}`) + say("hi"),
			want:   []string{"final"},
			parent: "root",
		},
		{
			name:    "a rollout written before the wrapper",
			data:    `{"id":"old","timestamp":"2025-05-01T10:00:00Z"}` + "\n" + `{"record_type":"state"}` + "\n" + `{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}` + "\n" + `{"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\"]}","call_id":"c"}` + "\n" + `{"type":"function_call_output","call_id":"c","output":"{\"output\":\"x\",\"metadata\":{\"exit_code\":0}}"}` + "\n",
			want:    []string{"input", "message", "tool_call shell", "tool_result shell"},
			skipped: map[string]int{"record_type state": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runs, skipped := importOut(t, "codex", "r.jsonl", tt.data)
			require.Len(t, runs, 1)
			assert.Equal(t, tt.want, kinds(runs[0]))
			var usage []termination.Usage
			for _, e := range runs[0].Events {
				if e.Kind == termination.KindMessage || e.Kind == termination.KindFinal {
					usage = append(usage, e.Usage)
				}
			}
			if tt.usage != nil {
				assert.Equal(t, tt.usage, usage)
			}
			assert.Equal(t, tt.parent, runs[0].Parent)
			if tt.skipped == nil {
				tt.skipped = map[string]int{}
			}
			assert.Equal(t, tt.skipped, skipped)
		})
	}
}

func TestGeminiCLIMapping(t *testing.T) {
	data, err := os.ReadFile("testdata/gemini-session.json")
	require.NoError(t, err)
	runs, skipped := importOut(t, "gemini-cli", "session.json", string(data))
	require.Len(t, runs, 1)
	r := runs[0]
	assert.Equal(t, "5f2c8e41-9a7b-4c3d-b1e0-7d6a2f9c0b38", r.ID)
	assert.Equal(t, []string{
		"input", "message", "tool_call run_shell_command", "tool_result run_shell_command",
		"message", "tool_call read_file", "tool_result read_file (File not found: /home/dev/app/src/date.js)", "tool_call glob", "tool_result glob",
		"final",
	}, kinds(r))
	assert.Equal(t, termination.Usage{InputTokens: 9985, OutputTokens: 88 + 95}, r.Events[4].Usage,
		"input already holds the cached tokens (Gemini's promptTokenCount); thoughts are output")
	assert.Equal(t, "gemini-2.5-pro", r.Events[4].Model)
	assert.Equal(t, map[string]int{"info message": 1}, skipped)

	// The JSON Lines form: a rewritten message, a rewind, $set.
	data, err = os.ReadFile("testdata/gemini-session.jsonl")
	require.NoError(t, err)
	runs2, _ := importOut(t, "gemini-cli", "session.jsonl", string(data))
	assert.Equal(t, runs, runs2)
}

func TestGeminiCLIRules(t *testing.T) {
	msg := func(typ, extra string) string {
		return `{"id":"` + typ + strconv.Itoa(len(extra)) + `","timestamp":"2025-11-03T09:00:00Z","type":"` + typ + `","content":"x"` + extra + `}`
	}
	tests := []struct {
		name, file, data string
		want             []string
		parent           string
		usage            termination.Usage
	}{
		{
			name: "tool use prompt tokens are input, thoughts output",
			data: `{"sessionId":"s","messages":[` + msg("gemini", `,"tokens":{"input":100,"output":5,"cached":90,"thoughts":7,"tool":20,"total":132}`) + `]}`,
			want: []string{"final"}, usage: termination.Usage{InputTokens: 120, OutputTokens: 12},
		},
		{
			name: "cancelled and pending tool calls; error and warning messages",
			data: `{"sessionId":"s","messages":[` + msg("gemini", `,"toolCalls":[{"id":"a","name":"write_file","args":{},"status":"cancelled"},{"id":"b","name":"run_shell_command","args":{},"status":"executing"}]`) + `,` + msg("warning", "") + `,` + msg("error", "") + `]}`,
			want: []string{"message", "tool_call write_file", "tool_result write_file (cancelled)", "tool_call run_shell_command", "error (x)"},
		},
		{
			name:   "a sub-agent's conversation: parent from its directory",
			file:   "chats/parent-session/child.jsonl",
			data:   `{"sessionId":"child","projectHash":"p","kind":"subagent"}` + "\n" + msg("gemini", "") + "\n",
			want:   []string{"final"},
			parent: "parent-session",
		},
		{
			name: "a rewind to an id no message has drops them all",
			data: `{"sessionId":"s","projectHash":"p"}` + "\n" + msg("user", "") + "\n" + `{"$rewindTo":"nope"}` + "\n" + msg("gemini", "") + "\n",
			want: []string{"final"},
		},
		{
			name: "$set messages replaces the list",
			data: `{"sessionId":"s","projectHash":"p"}` + "\n" + msg("user", "") + "\n" + `{"$set":{"messages":[` + msg("gemini", "") + `]}}` + "\n",
			want: []string{"final"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := cmpOr(tt.file, "s.json")
			runs, _ := importOut(t, "gemini-cli", file, tt.data)
			require.Len(t, runs, 1)
			assert.Equal(t, tt.want, kinds(runs[0]))
			assert.Equal(t, tt.parent, runs[0].Parent)
			if tt.usage != (termination.Usage{}) {
				assert.Equal(t, tt.usage, runs[0].Events[0].Usage)
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func TestAgentImportErrors(t *testing.T) {
	const a = `{"type":"assistant","sessionId":"s","message":{"id":"m","content":[`
	tests := []struct {
		name, format, text, err string
	}{
		{"malformed line", "claude-code", "{\"type\":\"summary\"}\n{\"type\":,}\n", "f.jsonl: line 2: malformed JSON"},
		{"truncated last line", "claude-code", "{\"type\":\"summary\"}\n{\"type\":\"user\",\"mess", "f.jsonl: line 2: malformed JSON: the file looks truncated"},
		{"a JSON document", "claude-code", "{\n  \"type\": \"user\"\n}\n", "f.jsonl: line 1: the file is a JSON document, not JSON Lines (one JSON object per line): its first object does not end on its first line"},
		{"no type", "claude-code", `{"sessionId":"s"}`, "f.jsonl: line 1: no type"},
		{"no message", "claude-code", `{"type":"assistant","sessionId":"s"}`, "f.jsonl: line 1: no message in this assistant line"},
		{"unknown block", "claude-code", a + `{"type":"hologram"}]}}`, `f.jsonl: line 1: content[0]: a block of type "hologram" in an assistant message`},
		{"tool_use without a name", "claude-code", a + `{"type":"tool_use","id":"t"}]}}`, "f.jsonl: line 1: content[0]: a tool_use block without a name"},
		{"unpaired result", "claude-code", `{"type":"user","sessionId":"s","message":{"content":[{"type":"tool_result","tool_use_id":"t9","content":"x"}]}}`, `f.jsonl: line 1: content[0]: tool_use_id "t9": no earlier tool_use of this run has this id`},
		{"bad timestamp", "claude-code", `{"type":"user","timestamp":"yesterday","message":{"content":"x"}}`, `f.jsonl: line 1: timestamp: want an RFC 3339 time, got "yesterday"`},
		{"field of the wrong kind", "claude-code", `{"type":"user","isSidechain":"yes","message":{"content":"x"}}`, "f.jsonl: line 1: isSidechain: want true or false, got a string"},
		{"content of the wrong kind", "claude-code", `{"type":"user","message":{"content":5}}`, "f.jsonl: line 1: content: want a string or a list of blocks, got a number"},
		{"bad usage", "claude-code", a + `],"usage":"lots"}}`, "f.jsonl: line 1: usage: want token counts"},
		{"no session lines", "claude-code", `{"type":"summary","summary":"x"}`, "f.jsonl: no user or assistant lines: not a Claude Code session"},
		{"empty", "claude-code", "\n \n", "f.jsonl: no user or assistant lines"},
		{"codex: unknown line type", "codex", `{"type":"hologram","payload":{}}`, `f.jsonl: line 1: type "hologram": not a line of a Codex rollout`},
		{"codex: unknown item", "codex", `{"type":"response_item","payload":{"type":"hologram"}}`, `f.jsonl: line 1: response_item of type "hologram"`},
		{"codex: unpaired output", "codex", `{"type":"response_item","payload":{"type":"function_call_output","call_id":"c9","output":"x"}}`, `f.jsonl: line 1: function_call_output: call_id "c9": no earlier tool call has this id`},
		{"codex: message without a role", "codex", `{"type":"response_item","payload":{"type":"message","content":[]}}`, "f.jsonl: line 1: a message without a role"},
		{"codex: payload not an object", "codex", `{"type":"response_item","payload":[1]}`, "f.jsonl: line 1: payload: the entry: want an object, got a list"},
		{"codex: call without a name", "codex", `{"type":"response_item","payload":{"type":"function_call","call_id":"c"}}`, "f.jsonl: line 1: a function_call without a name"},
		{"codex: legacy line without type", "codex", "{\"id\":\"x\"}\n{\"foo\":1}\n", "f.jsonl: line 2: no type"},
		{"codex: empty", "codex", "", "f.jsonl: empty file"},
		{"gemini: empty", "gemini-cli", " ", "f.jsonl: empty file"},
		{"gemini: not a session", "gemini-cli", `{"chats":[]}`, "f.jsonl: no messages: not a Gemini CLI session"},
		{"gemini: broken document", "gemini-cli", "{\n  \"sessionId\": \"s\",\n  \"messages\": [,]\n}\n", "f.jsonl: line 3: malformed JSON: a session document that is not valid JSON"},
		{"gemini: truncated document", "gemini-cli", "{\n  \"sessionId\": \"s\",\n  \"messages\": [\n", "f.jsonl: line 3: malformed JSON: the session document looks truncated"},
		{"gemini: unknown message type", "gemini-cli", `{"sessionId":"s","messages":[{"id":"a","type":"user","content":"x"},{"id":"b","type":"robot","content":"x"}]}`, `f.jsonl: messages[1]: type "robot"`},
		{"gemini: tool call without status", "gemini-cli", `{"sessionId":"s","messages":[{"id":"a","type":"gemini","content":"","toolCalls":[{"id":"t","name":"ls","args":{}}]}]}`, "f.jsonl: messages[0]: toolCalls[0]: no status"},
		{"gemini: bad content", "gemini-cli", `{"sessionId":"s","messages":[{"id":"a","type":"user","content":7}]}`, "f.jsonl: messages[0]: content: want a string or a list of parts, got a number"},
		{"gemini: negative tokens", "gemini-cli", `{"sessionId":"s","messages":[{"id":"a","type":"gemini","content":"","tokens":{"input":-1}}]}`, "f.jsonl: messages[0]: tokens: negative token count"},
		{"gemini: a Claude Code file", "gemini-cli", "{\"type\":\"user\",\"sessionId\":\"s\",\"message\":{\"content\":\"x\"}}\n{\"type\":\"user\",\"sessionId\":\"s\"}\n", "f.jsonl: line 1: not a record of a Gemini CLI session"},
		{"gemini: a document without messages", "gemini-cli", `{"sessionId":"s","projectHash":"p"}`, "f.jsonl: no messages: not a Gemini CLI session"},
		{"codex: a Claude Code file", "codex", "{\"type\":\"user\",\"sessionId\":\"s\",\"message\":{\"content\":\"x\"}}\n", `f.jsonl: line 1: type "user": not a line of a Codex rollout`},
		{"claude-code: a Codex rollout", "claude-code", "{\"type\":\"session_meta\",\"payload\":{\"id\":\"x\"}}\n", "f.jsonl: no user or assistant lines: not a Claude Code session"},
		{"gemini: unknown record", "gemini-cli", "{\"sessionId\":\"s\",\"projectHash\":\"p\"}\n{\"hello\":1}\n", "f.jsonl: line 2: not a record of a Gemini CLI session"},
		{"gemini: bad record", "gemini-cli", "{\"sessionId\":\"s\",\"projectHash\":\"p\"}\n{\"id\":\"a\",\"type\":\"user\",\"content\":\"x\"}\n{\"id\":\"b\",\"type\":\"gemini\",\"toolCalls\":[{\"name\":\"x\",\"status\":\"done\"}]}\n", `f.jsonl: line 3: toolCalls[0]: status "done"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := importData(tt.format, "f.jsonl", []byte(tt.text), Options{})
			require.ErrorContains(t, err, tt.err)
			assert.NotContains(t, err.Error(), "\n")
			assert.NotContains(t, err.Error(), "Go ", "no Go types in messages")
			assert.NotContains(t, err.Error(), "struct")
		})
	}
}

// TestAgentLongLines: a line of several megabytes (a tool result holding
// a whole file) is read whole, in every JSON Lines format.
func TestAgentLongLines(t *testing.T) {
	big := strings.Repeat("x", 5<<20)
	claude := `{"type":"assistant","sessionId":"s","message":{"id":"m","content":[{"type":"tool_use","id":"t","name":"Read","input":{}}]}}` + "\n" +
		`{"type":"user","sessionId":"s","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"` + big + `"}]}}` + "\n"
	runs, _ := importOut(t, "claude-code", "s.jsonl", claude)
	require.Len(t, runs, 1)
	assert.Len(t, runs[0].Events[2].Text, len(big))

	codex := `{"type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{}","call_id":"c"}}` + "\n" +
		`{"type":"response_item","payload":{"type":"function_call_output","call_id":"c","output":"` + big + `"}}`
	runs, _ = importOut(t, "codex", "r.jsonl", codex)
	require.Len(t, runs, 1)
	assert.Len(t, runs[0].Events[2].Text, len(big))
}

func TestAgentLinesTruncation(t *testing.T) {
	_, err := importData("claude-code", "f.jsonl", []byte("{\"type\":\"summary\"}\n{\"type\":\"user\",\"message\":{\"content\":\"x"), Options{})
	assert.ErrorContains(t, err, "f.jsonl: line 2: malformed JSON: the file looks truncated")
	_, err = importData("claude-code", "f.jsonl", []byte("{\"type\":\"summary\"}\n{\"type\":,}"), Options{})
	assert.ErrorContains(t, err, "f.jsonl: line 2: malformed JSON")
	assert.NotContains(t, err.Error(), "truncated", "a broken last line that is complete is not a cut")
}
