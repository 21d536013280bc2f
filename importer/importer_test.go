package importer

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/termination"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestImportGolden imports each file of testdata/ and compares the stream
// with its golden file, then checks that the stream replays.
func TestImportGolden(t *testing.T) {
	tests := []struct {
		format, file, golden string
		opts                 Options
	}{
		{"openai-chat", "chat.json", "chat.golden.jsonl", Options{ErrorPrefix: "ERROR:"}},
		{"openai-chat", "batch.jsonl", "batch.golden.jsonl", Options{MessagesField: "traj", IDField: "instance_id"}},
		{"mini-swe-agent", "django__django-11099.traj.json", "django__django-11099.golden.jsonl", Options{}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			runs, err := importPath(tt.format, filepath.Join("testdata", tt.file), tt.opts)
			require.NoError(t, err)
			var b bytes.Buffer
			require.NoError(t, WriteStream(&b, runs))
			golden := filepath.Join("testdata", tt.golden)
			if *update {
				require.NoError(t, os.WriteFile(golden, b.Bytes(), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			assert.Equal(t, string(want), b.String())
			// Every line decodes as a §1 event.
			dec := termination.NewDecoder(bytes.NewReader(b.Bytes()))
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

func TestOpenAIChatMapping(t *testing.T) {
	runs, err := importPath("openai-chat", "testdata/chat.json", Options{ErrorPrefix: "ERROR:"})
	require.NoError(t, err)
	require.Len(t, runs, 1)
	assert.Equal(t, "chat#1", runs[0].ID, "without -id, runs are named FILE#N")
	ev := runs[0].Events
	kinds := make([]string, len(ev))
	for i, e := range ev {
		kinds[i] = e.Kind.String()
	}
	assert.Equal(t, []string{"input", "input", "message", "tool_call", "tool_call", "tool_result", "tool_result", "final"}, kinds)
	assert.Equal(t, "system", ev[0].Source)
	assert.Equal(t, termination.Usage{InputTokens: 120, OutputTokens: 18}, ev[2].Usage, "prompt_tokens already include the cached ones")
	assert.Equal(t, "gpt-4o-2024-08-06", ev[2].Model)
	assert.JSONEq(t, `{"path": "README.md"}`, string(ev[3].Args))
	assert.Equal(t, "call_1", ev[3].CallID)
	assert.Equal(t, "list_dir", ev[5].Tool, "a result takes its paired call's tool")
	assert.Equal(t, "read_file", ev[6].Tool)
	assert.Equal(t, "ERROR: permission denied", ev[6].Err, "-error-prefix")
	assert.Empty(t, ev[5].Err)
	assert.Equal(t, "I cannot read it; \nit is not readable.", ev[7].Text)

	runs, err = importPath("openai-chat", "testdata/batch.jsonl", Options{MessagesField: "traj", IDField: "instance_id"})
	require.NoError(t, err)
	require.Len(t, runs, 3)
	assert.Equal(t, []string{"task-a", "task-b", "task-a#2"}, []string{runs[0].ID, runs[1].ID, runs[2].ID})
	assert.Equal(t, `"not json"`, string(runs[1].Events[2].Args), "arguments that are not JSON are kept as a string")
	assert.Equal(t, termination.KindMessage, runs[1].Events[1].Kind, "an assistant message with tool calls is not final")

	runs, err = importPath("openai-chat", "testdata/batch.jsonl", Options{MessagesField: "traj"})
	require.NoError(t, err)
	assert.Equal(t, []string{"batch#1", "batch#2", "batch#3"}, []string{runs[0].ID, runs[1].ID, runs[2].ID})
}

func TestMiniSWEAgentMapping(t *testing.T) {
	runs, err := importPath("mini-swe-agent", "testdata/django__django-11099.traj.json", Options{})
	require.NoError(t, err)
	require.Len(t, runs, 1)
	r := runs[0]
	assert.Equal(t, "django__django-11099", r.ID)
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
	assert.Equal(t, []string{
		"input", "input",
		"message", "tool_call grep", "tool_result grep",
		"message", "tool_call pytest", "tool_result pytest (exit code 1)",
		"message", "error (format error: 2 bash blocks, want exactly one)",
		"message", "tool_call sed", "tool_result sed",
		"message", "tool_call pytest", "tool_result pytest (timeout: the command timed out and was killed)",
		"final",
	}, got)
	assert.Equal(t, termination.Usage{InputTokens: 1500, OutputTokens: 60}, r.Events[2].Usage)
	assert.Equal(t, 0.0125, r.Events[2].Cost, "cost from the response's usage.cost")
	assert.Equal(t, "2025-11-17T09:00:00Z", r.Events[2].Time.Format("2006-01-02T15:04:05Z07:00"), "time is the response's created")
	assert.Equal(t, "THOUGHT: Done; submit.", r.Events[len(r.Events)-1].Text, "the submission's command and output are not emitted")
	assert.JSONEq(t, `{"command": "cd /testbed && grep -rn \"ASCIIUsernameValidator\" django/contrib/auth/validators.py"}`, string(r.Events[3].Args))
}

func TestToolName(t *testing.T) {
	tests := map[string]string{
		"ls -la":                                           "ls",
		"/usr/bin/grep -rn x .":                            "grep",
		"cd /testbed && grep -rn x .":                      "grep",
		"cd /testbed; cd src && ./run.sh":                  "run.sh",
		"cd /testbed":                                      "cd",
		"FOO=1 BAR='a b' make test":                        "make",
		"PYTHONPATH=. python -m pytest -q":                 "pytest",
		"python3 -m pip install x":                         "pip",
		"python3.11 -m venv .venv":                         "venv",
		"python script.py":                                 "python",
		"timeout 60 pytest -q":                             "pytest",
		"timeout -s KILL 10s /usr/bin/python3 -m unittest": "unittest",
		"cd /x && timeout 5 FOO=1 go test ./...":           "go",
		"\"quoted cmd\" arg":                               "quoted cmd",
		"echo a && echo b":                                 "echo",
		"":                                                 "",
	}
	for cmd, want := range tests {
		assert.Equal(t, want, ToolName(cmd), "%q", cmd)
	}
}

func TestImportErrors(t *testing.T) {
	tests := []struct {
		name, format, text string
		opts               Options
		err                string
	}{
		{"unknown format", "langchain", "{}", Options{}, `unknown format "langchain" (want one of openai-chat, mini-swe-agent, otlp)`},
		{"empty", "openai-chat", " \n", Options{}, "f.json: empty file"},
		{"empty list", "openai-chat", "[]", Options{}, "f.json: no runs: an empty list"},
		{"malformed", "openai-chat", "[\n{\"role\": \"user\",,}]", Options{}, "f.json: line 2: malformed JSON"},
		{"no messages field", "openai-chat", `{"msgs": []}`, Options{}, `f.json: no "messages" field (name the field holding the messages with -messages)`},
		{"messages not a list", "openai-chat", `{"messages": 3}`, Options{}, "messages: want a list of messages, got a number"},
		{"unknown role", "openai-chat", `[{"role":"user","content":"x"},{"role":"robot","content":"x"}]`, Options{}, `f.json: messages[1]: role "robot"`},
		{"no role", "openai-chat", `[{"role":"user"},{"content":"x"}]`, Options{}, "f.json: messages[1]: no role"},
		{"unpaired tool", "openai-chat", `[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"c9","content":"x"}]`, Options{}, `messages[1]: tool_call_id "c9": no earlier assistant tool call has this id`},
		{"bad usage", "openai-chat", `[{"role":"assistant","content":"x","usage":"lots"}]`, Options{}, "messages[0]: usage: want token counts"},
		{"bad content", "openai-chat", `[{"role":"user","content":5}]`, Options{}, "messages[0]: content: want a string or a list of parts, got a number"},
		{"entry of a JSON Lines file", "openai-chat", "{\"messages\": [{\"role\":\"user\",\"content\":\"x\"}]}\n{\"messages\": [{\"role\":\"x\"}]}\n", Options{}, `f.json: line 2: messages[0]: role "x"`},
		{"missing id", "openai-chat", `{"messages": []}`, Options{IDField: "id"}, `no "id" field (-id)`},
		{"bad id", "openai-chat", `{"id": {}, "messages": []}`, Options{IDField: "id"}, "id: want a string or a number naming the run, got an object"},
		{"id on a bare list", "openai-chat", `[{"role":"user","content":"x"}]`, Options{IDField: "id"}, "-id id: the file is a bare list of messages"},
		{"not a trajectory", "mini-swe-agent", `[1, 2]`, Options{}, "not a mini-swe-agent trajectory"},
		{"no messages", "mini-swe-agent", `{"info": {}}`, Options{}, "not a mini-swe-agent trajectory: no messages"},
		{"tool-calling trajectory", "mini-swe-agent", `{"messages": [{"role":"assistant","content":"x","tool_calls":[{"id":"a"}]}]}`, Options{}, "messages[0]: tool_calls: a trajectory of the tool-calling agent; import it with -from openai-chat"},
		{"stray user message", "mini-swe-agent", `{"messages": [{"role":"user","content":"task"},{"role":"user","content":"more"}]}`, Options{}, "messages[1]: a user message that follows no action"},
		{"bad observation", "mini-swe-agent", "{\"messages\": [{\"role\":\"user\",\"content\":\"task\"},{\"role\":\"assistant\",\"content\":\"```bash\\nls\\n```\"},{\"role\":\"user\",\"content\":\"huh\"}]}", Options{}, "messages[2]: an observation with neither <returncode> nor a timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := importData(tt.format, "f.json", []byte(tt.text), tt.opts)
			require.ErrorContains(t, err, tt.err)
			assert.NotContains(t, err.Error(), "\n")
		})
	}
}

func TestWriteDir(t *testing.T) {
	dir := t.TempDir()
	runs := []Run{
		{ID: "a/b c", Events: []termination.Event{{Kind: termination.KindInput, Text: "x"}}},
		{ID: "child", Parent: "a/b c", Events: []termination.Event{{Kind: termination.KindFinal}}},
	}
	files, err := WriteDir(dir, runs)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, "a_b_c.jsonl"), filepath.Join(dir, "child.jsonl")}, files)
	b, err := os.ReadFile(files[1])
	require.NoError(t, err)
	assert.Equal(t, "{\"kind\":\"final\"}\n", string(b), "a one-run file: no run, no parent")
	_, err = WriteDir(dir, runs[:1])
	assert.ErrorContains(t, err, "cannot write run a/b c", "never overwrites")
	assert.Equal(t, "_..", FileName(".."))
}

func TestUniquify(t *testing.T) {
	runs := []Run{{ID: "a"}, {ID: "a"}, {ID: "b"}, {ID: "a#2"}, {ID: "a"}}
	Uniquify(runs)
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	assert.Equal(t, "a a#2 b a#2#2 a#3", strings.Join(ids, " "))
}

func TestUsageCounting(t *testing.T) {
	tests := map[string]termination.Usage{
		`{"prompt_tokens": 100, "completion_tokens": 20, "prompt_tokens_details": {"cached_tokens": 80}, "completion_tokens_details": {"reasoning_tokens": 15}}`: {InputTokens: 100, OutputTokens: 20},
		`{"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 300, "cache_creation_input_tokens": 40}`:                                            {InputTokens: 350, OutputTokens: 5},
		`null`: {},
		`{}`:   {},
	}
	for in, want := range tests {
		got, err := usage([]byte(in))
		require.NoError(t, err)
		assert.Equal(t, want, got, in)
	}
	_, err := usage([]byte(`{"prompt_tokens": -1}`))
	assert.ErrorContains(t, err, "negative")
}
