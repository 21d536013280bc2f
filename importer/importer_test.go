package importer

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/codec"
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
		{"mini-swe-agent", "mini-swe-agent-1-local.traj.json", "mini-swe-agent-1-local.golden.jsonl", Options{}},
		{"mini-swe-agent", "micro-swe-agent-1.0-github_issue.traj.json", "micro-swe-agent-1.0-github_issue.golden.jsonl", Options{}},
		{"mini-swe-agent", "mini-swe-agent-2-toolcall.traj.json", "mini-swe-agent-2-toolcall.golden.jsonl", Options{}},
		{"mini-swe-agent", "pylint-dev__pylint-6528.traj.json", "pylint-dev__pylint-6528.golden.jsonl", Options{}},
		{"mini-swe-agent", "pvlib__pvlib-python-1606.traj.json", "pvlib__pvlib-python-1606.golden.jsonl", Options{}},
		{"swe-agent", "6e44b9__sweagenttestrepo-1c2844.traj", "6e44b9__sweagenttestrepo-1c2844.golden.jsonl", Options{}},
		{"swe-agent", "function_calling_simple.traj", "function_calling_simple.golden.jsonl", Options{}},
		{"swe-agent", "humanevalfix-python-0.traj", "humanevalfix-python-0.golden.jsonl", Options{}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			runs, err := importPath(tt.format, filepath.Join("testdata", tt.file), tt.opts)
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
			// Every line decodes as a §1 event.
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

// TestMiniSWEAgentTimedOutInOutput: an observation with a <returncode>
// finished, whatever its output says; only the timeout template (which has
// none) is a timeout.
func TestMiniSWEAgentTimedOutInOutput(t *testing.T) {
	turn := func(cmd string) string {
		return `{"role":"assistant","content":"x\n` + "```bash\\n" + cmd + "\\n```" + `"},`
	}
	data := `[{"role":"system","content":"s"},{"role":"user","content":"t"},` +
		turn("curl -s http://x") + `{"role":"user","content":"<returncode>0</returncode>\n<output>\nrequest timed out, retried: ok\n</output>"},` +
		turn("pytest") + `{"role":"user","content":"<returncode>1</returncode>\n<output>\nFAILED test_fetch - TimeoutError: timed out\n</output>"},` +
		turn("sleep 999") + `{"role":"user","content":"The last command <command>sleep 999</command> timed out and has been killed.\nThe output of the command was:\n <output>\n\n</output>"}]`
	runs, _ := importOut(t, "mini-swe-agent", "x.traj.json", data)
	require.Len(t, runs, 1)
	assert.Equal(t, []string{
		"input", "input",
		"message", "tool_call curl", "tool_result curl",
		"message", "tool_call pytest", "tool_result pytest (exit code 1)",
		"message", "tool_call sleep", "tool_result sleep (timeout: the command timed out and was killed)",
	}, eventKinds(runs[0].Events))
}

// eventKinds lists a run's events as "kind tool (error)".
func eventKinds(events []termination.Event) []string {
	var got []string
	for _, e := range events {
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

func TestMiniSWEAgent2Mapping(t *testing.T) {
	runs, err := importPath("mini-swe-agent", "testdata/mini-swe-agent-2-toolcall.traj.json", Options{})
	require.NoError(t, err)
	require.Len(t, runs, 1)
	ev := runs[0].Events
	assert.Equal(t, []string{
		"input", "input",
		"message", "tool_call grep", "tool_result grep",
		"message", "tool_call python", "tool_result python (timeout: the command timed out and was killed)",
		"message", "error (format error: No tool calls found in the response. Every response MUST include at least one tool call.)",
		"message", "tool_call sed", "tool_result sed (exit code 1)",
		"final",
	}, eventKinds(ev), "the submitting call has no result and is not emitted; the exit message makes its turn final")
	assert.Equal(t, termination.Usage{InputTokens: 1520, OutputTokens: 64}, ev[2].Usage)
	assert.Equal(t, 0.0054, ev[2].Cost, "extra.cost")
	assert.Equal(t, "claude-sonnet-4-5-20250929", ev[2].Model)
	assert.Equal(t, "toolu_01", ev[3].CallID)
	assert.Equal(t, "toolu_01", ev[4].CallID)
	assert.Equal(t, "2025-11-26T10:00:02.1Z", ev[4].Time.Format(time.RFC3339Nano), "a result's time is its extra.timestamp")
	assert.Equal(t, 0.0012, ev[8].Cost, "a rejected response is still billed: its usage and cost are on the format error's message")
	assert.Equal(t, termination.Usage{InputTokens: 1850, OutputTokens: 40}, ev[8].Usage)
	assert.Contains(t, ev[8].Text, "I will now change the regex", "the rejected response's text, from extra.response")
	assert.Equal(t, "F.\n1 failed, 1 passed in 0.41s\n", ev[12].Text, "extra.raw_output")
	var spent int64
	for _, e := range ev {
		spent += e.Usage.InputTokens + e.Usage.OutputTokens
	}
	assert.Equal(t, int64(1520+64+1710+90+1850+40+1930+120+2100+70), spent, "every response's usage, once")
}

func TestMiniSWEAgentExit(t *testing.T) {
	tests := []struct {
		name, exit string
		want       []string
	}{
		{"limits", `{"role":"exit","content":"LimitsExceeded","extra":{"exit_status":"LimitsExceeded","submission":""}}`,
			[]string{"input", "message", "tool_call ls", "tool_result ls", "error (LimitsExceeded)"}},
		{"exception", `{"role":"exit","content":"boom","extra":{"exit_status":"RuntimeError","submission":""}}`,
			[]string{"input", "message", "tool_call ls", "tool_result ls", "error (RuntimeError: boom)"}},
		{"submitted after a result", `{"role":"exit","content":"","extra":{"exit_status":"Submitted"}}`,
			[]string{"input", "final", "tool_call ls", "tool_result ls"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := `[{"role":"user","content":"task"},` +
				`{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\": \"ls\"}"}}]},` +
				`{"role":"tool","tool_call_id":"c1","content":"a","extra":{"returncode":0,"raw_output":"a"}},` + tt.exit + `]`
			runs, err := importData("mini-swe-agent", "x.traj.json", []byte(data), Options{})
			require.NoError(t, err)
			assert.Equal(t, tt.want, eventKinds(runs[0].Events))
		})
	}
}

func TestMiniSWEAgentBareArray(t *testing.T) {
	runs, err := importPath("mini-swe-agent", "testdata/mini-swe-agent-1-local.traj.json", Options{})
	require.NoError(t, err)
	require.Len(t, runs, 1)
	assert.Equal(t, "mini-swe-agent-1-local", runs[0].ID)
	assert.Equal(t, []string{"input", "input", "message", "tool_call echo", "tool_result echo", "final"}, eventKinds(runs[0].Events),
		"the empty user message after the submission is its output, not emitted")
}

func TestSWEAgentMapping(t *testing.T) {
	runs, err := importPath("swe-agent", "testdata/6e44b9__sweagenttestrepo-1c2844.traj", Options{})
	require.NoError(t, err)
	require.Len(t, runs, 1)
	ev := runs[0].Events
	assert.Equal(t, "6e44b9__sweagenttestrepo-1c2844", runs[0].ID)
	assert.Equal(t, []string{"input", "input",
		"message", "tool_call find_file", "tool_result find_file",
		"message", "tool_call open", "tool_result open",
		"message", "tool_call edit", "tool_result edit",
		"message", "tool_call python3", "tool_result python3",
		"final",
	}, eventKinds(ev), "the submit step, missing from the history, is read from the trajectory")
	assert.Equal(t, "call_fJuazlMUN5fQDQ73G6XSpYpx", ev[4].CallID, "tool_call_ids[0] pairs the result")
	assert.JSONEq(t, `{"file_name":"missing_colon.py"}`, string(ev[3].Args))
	assert.Equal(t, "main", ev[2].Source, "the history's agent")
	assert.Equal(t, "main", ev[14].Source)
}

func TestSWEAgentShapes(t *testing.T) {
	tests := []struct {
		name, data string
		want       []string
		skipped    []Skipped
	}{
		{"thought-action history, demonstrations left out",
			`{"history": [{"role":"system","content":"s"},{"role":"user","content":"demo","is_demo":true},{"role":"user","content":"task"},` +
				`{"role":"assistant","content":"look","action":"cd /repo && ls -la"},{"role":"user","content":"a.py"},` +
				`{"role":"assistant","content":"done","action":"submit"}]}`,
			[]string{"input", "input", "message", "tool_call ls", "tool_result ls", "final"}, []Skipped{{"demonstration message", 1}}},
		{"submit in the history, its patch not an event",
			`{"history": [{"role":"user","content":"task"},{"role":"assistant","content":"x","tool_calls":[{"id":"b","function":{"name":"bash","arguments":"{\"command\":\"python -m pytest\"}"}}]},` +
				`{"role":"tool","content":"ok","tool_call_ids":["b"]},{"role":"assistant","content":"done","tool_calls":[{"id":"s","function":{"name":"submit","arguments":"{}"}}]},{"role":"tool","content":"diff","tool_call_ids":["s"]}],` +
				`"trajectory": [{"action":"python -m pytest"},{"action":"submit"}], "info": {"exit_status": "submitted"}}`,
			[]string{"input", "message", "tool_call pytest", "tool_result pytest", "final"}, []Skipped{}},
		{"a submit that is not the last response (a wrong CTF flag) is a tool call",
			`{"history": [{"role":"user","content":"task"},{"role":"assistant","content":"try","action":"submit flat{x}"},{"role":"user","content":"Wrong flag!"},` +
				`{"role":"assistant","content":"again","action":"submit flag{x}"}], "trajectory": [{"action":"submit flat{x}"},{"action":"submit flag{x}"}]}`,
			[]string{"input", "message", "tool_call submit", "tool_result submit", "final"}, []Skipped{}},
		{"the last step only in the trajectory, matched by its action",
			`{"history": [{"role":"user","content":"task"},{"role":"assistant","content":"look","action":"ls"},{"role":"user","content":"a.py"}],` +
				`"trajectory": [{"action":"cd /x"},{"action":"ls"},{"action":"submit","thought":"done"}]}`,
			[]string{"input", "message", "tool_call ls", "tool_result ls", "final"}, []Skipped{}},
		{"a limit ended the run",
			`{"history": [{"role":"user","content":"task"},{"role":"assistant","content":"x","tool_calls":[{"id":"b","function":{"name":"open","arguments":"{}"}}]},` +
				`{"role":"tool","content":"ok","tool_call_ids":["b"]}], "info": {"exit_status": "submitted (exit_cost)"}}`,
			[]string{"input", "message", "tool_call open", "tool_result open", "error (exit status: submitted (exit_cost))"}, []Skipped{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var runs []Run
			out := &Output{Emit: func(r Run) error { runs = append(runs, r); return nil }}
			require.NoError(t, Import("swe-agent", "x.traj", strings.NewReader(tt.data), Options{}, out))
			require.Len(t, runs, 1)
			assert.Equal(t, tt.want, eventKinds(runs[0].Events))
			assert.Equal(t, tt.skipped, out.Skipped())
		})
	}
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
		// Commands of real mini-swe-agent trajectories.
		"cd /testbed && grep -rn UsernameValidator django/": "grep",
		"PYTHONPATH=. python -m pytest tests/ -q":           "pytest",
		"timeout 60 /usr/bin/python3 -m unittest discover":  "unittest",
	}
	for cmd, want := range tests {
		assert.Equal(t, want, toolName(cmd), "%q", cmd)
	}
}

func TestImportErrors(t *testing.T) {
	tests := []struct {
		name, format, text string
		opts               Options
		err                string
	}{
		{"unknown format", "langchain", "{}", Options{}, `unknown format "langchain" (want one of openai-chat, mini-swe-agent, swe-agent, otlp, claude-code, codex, gemini-cli)`},
		{"empty", "openai-chat", " \n", Options{}, "f.json: empty file"},
		{"empty list", "openai-chat", "[]", Options{}, "f.json: no runs: an empty list"},
		{"malformed", "openai-chat", "[\n{\"role\": \"user\",,}]", Options{}, "f.json: line 2: malformed JSON"},
		{"no messages field", "openai-chat", `{"msgs": []}`, Options{}, `f.json: no "messages" field (name the field holding the messages with -messages)`},
		{"messages not a list", "openai-chat", `{"messages": 3}`, Options{}, "messages: want a list of messages, got a number"},
		{"unknown role", "openai-chat", `[{"role":"user","content":"x"},{"role":"robot","content":"x"}]`, Options{}, `f.json: messages[1]: role "robot"`},
		{"a mini-swe-agent trajectory", "openai-chat", `{"messages": [{"role":"user","content":"x"},{"role":"exit","content":"","extra":{"exit_status":"Submitted"}}]}`, Options{}, `f.json: messages[1]: role "exit": a mini-swe-agent 2 trajectory; import it with -from mini-swe-agent`},
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
		{"tool call without a name", "mini-swe-agent", `{"messages": [{"role":"assistant","content":"x","tool_calls":[{"id":"a"}]}]}`, Options{}, "messages[0]: tool_calls[0]: no function name"},
		{"messages not a list", "mini-swe-agent", `{"messages": 3}`, Options{}, "f.json: not a mini-swe-agent trajectory: messages: want a list, got a number"},
		{"a fraction for a return code", "mini-swe-agent", `{"messages": [{"role":"tool","extra":{"returncode":1.5}}]}`, Options{}, "not a mini-swe-agent trajectory: messages.extra.returncode: want a whole number, got 1.5"},
		{"a list of numbers", "mini-swe-agent", `[1, 2]`, Options{}, "not a mini-swe-agent trajectory: a list, but not of messages"},
		{"a string", "mini-swe-agent", `"x"`, Options{}, "not a mini-swe-agent trajectory (an object with messages, or a list of messages), got a string"},
		{"unpaired tool message", "mini-swe-agent", `[{"role":"user","content":"t"},{"role":"tool","tool_call_id":"c1","content":"x"}]`, Options{}, `messages[1]: tool_call_id "c1": no earlier tool call awaits a result with this id`},
		{"result twice", "mini-swe-agent", `[{"role":"assistant","content":"","tool_calls":[{"id":"c1","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"x","extra":{"returncode":0}},{"role":"tool","tool_call_id":"c1","content":"x","extra":{"returncode":0}}]`, Options{}, `messages[2]: tool_call_id "c1": no earlier tool call awaits`},
		{"after exit", "mini-swe-agent", `[{"role":"user","content":"t"},{"role":"exit","content":"","extra":{"exit_status":"LimitsExceeded"}},{"role":"user","content":"more"}]`, Options{}, "messages[2]: a message after the exit message"},
		{"responses form", "mini-swe-agent", `[{"role":"user","content":"t"},{"type":"function_call","call_id":"c1","name":"bash"}]`, Options{}, `messages[1]: type "function_call": an item in the OpenAI Responses form`},
		{"response not an object", "mini-swe-agent", "[{\"role\":\"assistant\",\"content\":\"```bash\\nls\\n```\",\"extra\":{\"response\":\"ModelResponse(id=1)\"}}]", Options{}, "messages[0]: extra.response: want the model's response as an object, got a string"},
		{"unknown role", "mini-swe-agent", `[{"role":"robot"}]`, Options{}, `messages[0]: role "robot": want system, user, assistant, tool or exit`},
		{"stray user message", "mini-swe-agent", `{"messages": [{"role":"user","content":"task"},{"role":"user","content":"more"}]}`, Options{}, "messages[1]: a user message that follows no action"},
		{"bad observation", "mini-swe-agent", "{\"messages\": [{\"role\":\"user\",\"content\":\"task\"},{\"role\":\"assistant\",\"content\":\"```bash\\nls\\n```\"},{\"role\":\"user\",\"content\":\"huh\"}]}", Options{}, "messages[2]: an observation with neither <returncode> nor a timeout"},
		{"swe-agent: a list", "swe-agent", `[]`, Options{}, "f.json: not a SWE-agent trajectory (an object with history), got an array"},
		{"swe-agent: no history", "swe-agent", `{"trajectory": []}`, Options{}, "f.json: not a SWE-agent trajectory: no history"},
		{"swe-agent: history not a list", "swe-agent", `{"history": 3}`, Options{}, "not a SWE-agent trajectory: history: want a list, got a number"},
		{"swe-agent: two ids", "swe-agent", `{"history": [{"role":"assistant","content":"x","tool_calls":[{"id":"a","function":{"name":"open","arguments":"{}"}}]},{"role":"tool","content":"y","tool_call_ids":["a","b"]}]}`, Options{}, "f.json: history[1]: tool_call_ids: want the id of the one call this is the result of, got 2 ids"},
		{"swe-agent: no ids", "swe-agent", `{"history": [{"role":"tool","content":"y"}]}`, Options{}, "history[0]: tool_call_ids: want the id of the one call this is the result of, got 0 ids"},
		{"swe-agent: unknown id", "swe-agent", `{"history": [{"role":"tool","content":"y","tool_call_ids":["zz"]}]}`, Options{}, `history[0]: tool_call_ids: "zz": no earlier tool call awaits a result with this id`},
		{"swe-agent: after submit", "swe-agent", `{"history": [{"role":"assistant","content":"x","tool_calls":[{"id":"s","function":{"name":"submit","arguments":"{}"}}]},{"role":"tool","content":"diff","tool_call_ids":["s"]},{"role":"user","content":"more"}]}`, Options{}, "history[2]: a message after the submission"},
		{"swe-agent: unknown role", "swe-agent", `{"history": [{"role":"robot","content":"x"}]}`, Options{}, `history[0]: role "robot": want system, user, assistant or tool`},
		{"swe-agent: bad content", "swe-agent", `{"history": [{"role":"user","content":7}]}`, Options{}, "history[0]: content: want a string or a list of parts, got a number"},
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
	files, err := Runs(runs).WriteDir(dir)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, "a_b_c.jsonl"), filepath.Join(dir, "child.jsonl")}, files)
	b, err := os.ReadFile(files[1])
	require.NoError(t, err)
	assert.Equal(t, "{\"kind\":\"final\"}\n", string(b), "a one-run file: no run, no parent")
	_, err = Runs(runs[:1]).WriteDir(dir)
	assert.ErrorContains(t, err, "cannot write run a/b c", "never overwrites")
	assert.Equal(t, "_..", fileName(".."))
}

// TestWriteStreamKeepsEachRunsOrder: the stream interleaves runs by time,
// but never reorders a run's own events. A Gemini CLI message is stamped
// when it was last written, after the tool calls it holds; a Claude Code
// caveat line may carry a later timestamp than the command line after it.
func TestWriteStreamKeepsEachRunsOrder(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 1, 16, 11, 0, s, 0, time.UTC) }
	runs := []Run{
		{ID: "p", Events: []termination.Event{
			{Kind: termination.KindInput, Text: "go", Time: at(1)},
			{Kind: termination.KindMessage, Text: "turn", Time: at(40)},
			{Kind: termination.KindToolCall, Tool: "read", Time: at(10)},
			{Kind: termination.KindToolResult, Tool: "read", Time: at(11)},
			{Kind: termination.KindFinal, Time: at(50)},
		}},
		{ID: "c", Parent: "p", Events: []termination.Event{
			{Kind: termination.KindInput, Text: "sub", Time: at(5)},
			{Kind: termination.KindFinal, Time: at(45)},
		}},
	}
	var b bytes.Buffer
	require.NoError(t, Runs(runs).WriteStream(&b))
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var ev struct{ Kind, Run, Tool string }
		require.NoError(t, json.Unmarshal([]byte(l), &ev))
		got = append(got, ev.Run+" "+ev.Kind+" "+ev.Tool)
	}
	assert.Equal(t, []string{
		"p input ", "c input ", "p message ", "p tool_call read", "p tool_result read", "c final ", "p final ",
	}, got, "each run in its own order; runs merged by time, an event no earlier than the run's events before it")
}

// TestWriteDirRemovesWhatItCannotWrite: a run whose file cannot be written
// whole (here an event that cannot be encoded) leaves no half-written file;
// the files written before it stay, and are returned.
func TestWriteDirRemovesWhatItCannotWrite(t *testing.T) {
	dir := t.TempDir()
	runs := Runs{
		{ID: "ok", Events: []termination.Event{{Kind: termination.KindFinal, Text: "done"}}},
		{ID: "bad", Events: []termination.Event{{Kind: termination.KindMessage, Text: "first"}, {Kind: termination.KindToolCall, Tool: "bash", Args: []byte(`{"command": "ls`)}}},
	}
	files, err := runs.WriteDir(dir)
	require.ErrorContains(t, err, "cannot write "+filepath.Join(dir, "bad.jsonl"))
	assert.Equal(t, []string{filepath.Join(dir, "ok.jsonl")}, files)
	assert.NoFileExists(t, filepath.Join(dir, "bad.jsonl"))
	assert.FileExists(t, filepath.Join(dir, "ok.jsonl"))
}

func TestUniquify(t *testing.T) {
	runs := []Run{{ID: "a"}, {ID: "a"}, {ID: "b"}, {ID: "a#2"}, {ID: "a"}}
	Runs(runs).Uniquify()
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	assert.Equal(t, "a a#2 b a#2#2 a#3", strings.Join(ids, " "))

	// A tree imported twice: the second copy's children belong to the
	// second copy's root (a parent named before its child is renamed with
	// it), in a list as in an Output.
	tree := func() []Run {
		return []Run{{ID: "root"}, {ID: "kid", Parent: "root"}, {ID: "root"}, {ID: "kid", Parent: "root"}, {ID: "other", Parent: "elsewhere"}}
	}
	want := []string{"root<", "kid<root", "root#2<", "kid#2<root#2", "other<elsewhere"}
	listed := tree()
	Runs(listed).Uniquify()
	out := &Output{Unique: true}
	for _, r := range tree() {
		require.NoError(t, out.Run(r))
	}
	for _, got := range [][]Run{listed, out.Runs} {
		var pairs []string
		for _, r := range got {
			pairs = append(pairs, r.ID+"<"+r.Parent)
		}
		assert.Equal(t, want, pairs)
	}
}

// TestOutputUnique: an Output with Unique gives the ids Uniquify gives,
// run by run as they are received, kept or handed to Emit, over several
// imports into it.
func TestOutputUnique(t *testing.T) {
	for _, emit := range []bool{false, true} {
		var emitted []string
		out := &Output{Unique: true}
		if emit {
			out.Emit = func(r Run) error { emitted = append(emitted, r.ID); return nil }
		}
		for _, id := range []string{"a", "a", "b", "a#2", "a"} {
			require.NoError(t, out.Run(Run{ID: id}))
		}
		ids := emitted
		if !emit {
			for _, r := range out.Runs {
				ids = append(ids, r.ID)
			}
		}
		assert.Equal(t, "a a#2 b a#2#2 a#3", strings.Join(ids, " "), "emit %v", emit)
	}
	// Two imports of one file into one Output: the second's runs get #2.
	out := &Output{Unique: true}
	for range 2 {
		require.NoError(t, ImportFile("openai-chat", "testdata/chat.json", Options{}, out))
	}
	require.Len(t, out.Runs, 2)
	assert.Equal(t, []string{"chat#1", "chat#1#2"}, []string{out.Runs[0].ID, out.Runs[1].ID})
	// Without Unique, the ids are the format's.
	plain := &Output{}
	for range 2 {
		require.NoError(t, ImportFile("openai-chat", "testdata/chat.json", Options{}, plain))
	}
	assert.Equal(t, plain.Runs[0].ID, plain.Runs[1].ID)
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

// TestMiniSWETimeoutWithReturnCodeInOutput (found by a review): the timeout
// message of mini-swe-agent 1.x holds the killed command's partial output;
// a <returncode> in that output (the agent was reading a trajectory or an
// agent log) is not the command's return code: still a timeout.
func TestMiniSWETimeoutWithReturnCodeInOutput(t *testing.T) {
	data := `[{"role":"system","content":"s"},{"role":"user","content":"t"},` +
		`{"role":"assistant","content":"x\n` + "```bash\\ntail -f run.log\\n```" + `"},` +
		`{"role":"user","content":"The last command <command>tail -f run.log</command> timed out and has been killed.\nThe output of the command was:\n <output>\nobservation: <returncode>0</returncode>\n</output>\nPlease try another command and make sure to avoid those requiring interactive input."}]`
	runs, _ := importOut(t, "mini-swe-agent", "x.traj.json", data)
	evs := runs[0].Events
	last := evs[len(evs)-1]
	if last.Err != "timeout: the command timed out and was killed" {
		t.Errorf("tool_result error = %q, want the timeout", last.Err)
	}
}
