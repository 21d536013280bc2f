package importer

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const chatLine = `{"id": "%s", "messages": [{"role": "user", "content": "task"}, {"role": "assistant", "content": "done"}]}` + "\n"

func line(id string) string { return strings.Replace(chatLine, "%s", id, 1) }

// TestOpenAIChatStreams: a JSON Lines run is handed on while the rest of
// the file has not been written yet (the import does not read it whole).
func TestOpenAIChatStreams(t *testing.T) {
	pr, pw := io.Pipe()
	got := make(chan string, 3)
	done := make(chan error, 1)
	go func() {
		out := &Output{Emit: func(r Run) error { got <- r.ID; return nil }}
		done <- Import("openai-chat", "live.jsonl", pr, Options{IDField: "id"}, out)
	}()
	_, err := io.WriteString(pw, line("a")+line("b"))
	require.NoError(t, err)
	select {
	case id := <-got:
		assert.Equal(t, "a", id, "the first line's run, once the second line is read")
	case <-time.After(10 * time.Second):
		t.Fatal("no run handed on before the end of the input: the import reads the file whole")
	}
	_, err = io.WriteString(pw, line("c"))
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	require.NoError(t, <-done)
	assert.Equal(t, "b", <-got)
	assert.Equal(t, "c", <-got)
}

func TestOpenAIChatJSONLines(t *testing.T) {
	long := strings.Repeat("x", 200<<10) // longer than the reader's buffer
	tests := []struct {
		name, data string
		opts       Options
		ids        []string
		err        string
	}{
		{"blank lines and CRLF", "\n" + strings.ReplaceAll(line("a"), "\n", "\r\n") + "\n  \n" + line("b"), Options{IDField: "id"}, []string{"a", "b"}, ""},
		{"BOM", "\xEF\xBB\xBF" + line("a"), Options{IDField: "id"}, []string{"a"}, ""},
		{"no newline at the end", strings.TrimSuffix(line("a")+line("b"), "\n"), Options{IDField: "id"}, []string{"a", "b"}, ""},
		{"repeated names", line("a") + line("a") + line("a"), Options{IDField: "id"}, []string{"a", "a#2", "a#3"}, ""},
		{"named after the file", line("a") + line("b"), Options{}, []string{"f#1", "f#2"}, ""},
		{"a long line", strings.Replace(line("a"), "task", long, 1), Options{IDField: "id"}, []string{"a"}, ""},
		{"a field that cannot be a tag", strings.ReplaceAll(line("a")+line("b"), `"messages"`, `"a,b"`), Options{MessagesField: "a,b", IDField: "id"}, []string{"a", "b"}, ""},
		{"a field's name in another case, as a document", `{"ID": "a",
"Messages": [{"role": "user", "content": "x"}]}`, Options{IDField: "id"}, []string{"a"}, ""},
		{"a field's name in another case, in JSON Lines", `{"ID": "a", "Messages": [{"role": "user", "content": "x"}]}` + "\n" + line("b"), Options{IDField: "id"}, []string{"a", "b"}, ""},
		{"a quote in the field's name", strings.ReplaceAll(line("a")+line("b"), `"messages"`, `"it's"`), Options{MessagesField: "it's", IDField: "id"}, []string{"a", "b"}, ""},
		{"a quoted field is not another", line("a"), Options{MessagesField: "it's", IDField: "id"}, nil, `f.jsonl: no "it's" field`},
		{"an id field that cannot be a tag", strings.ReplaceAll(line("a"), `"id"`, `"run'id"`), Options{IDField: "run'id"}, []string{"a"}, ""},
		{"malformed line", line("a") + line("b") + "{\"id\": \"c\",, }\n" + line("d"), Options{IDField: "id"}, nil, "f.jsonl: line 3: malformed JSON"},
		{"a value over two lines", line("a") + "{\"id\": \"b\",\n\"messages\": []}\n", Options{IDField: "id"}, nil, "f.jsonl: line 2: malformed JSON"},
		{"unmappable message", line("a") + strings.Replace(line("b"), `"user"`, `"robot"`, 1), Options{IDField: "id"}, nil, `f.jsonl: line 2: messages[0]: role "robot"`},
		{"one line names no line", strings.Replace(line("b"), `"user"`, `"robot"`, 1), Options{IDField: "id"}, nil, `f.jsonl: messages[0]: role "robot"`},
		{"bad message field", line("a") + `{"id": "b", "messages": [{"role": "assistant", "tool_calls": "x"}]}` + "\n", Options{IDField: "id"}, nil, "f.jsonl: line 2: messages[0]: tool_calls: want a list, got a string"},
		{"id of the wrong kind", strings.Replace(line("a"), `"a"`, `true`, 1), Options{IDField: "id"}, nil, "id: want a string or a number naming the run, got true or false"},
		{"missing id", line("a"), Options{IDField: "name"}, nil, `no "name" field (-id)`},
		{"messages null", `{"messages": null}` + "\n", Options{}, nil, "messages: want a list of messages, got null"},
		{"only blank lines", "\n \n", Options{}, nil, "f.jsonl: empty file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runs, err := importData("openai-chat", "f.jsonl", []byte(tt.data), tt.opts)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				assert.NotContains(t, err.Error(), "\n")
				return
			}
			require.NoError(t, err)
			var ids []string
			for _, r := range runs {
				ids = append(ids, r.ID)
			}
			assert.Equal(t, tt.ids, ids)
		})
	}
}

// TestOpenAIChatEmitError: the Output's error ends the import.
func TestOpenAIChatEmitError(t *testing.T) {
	stop := errors.New("disk full")
	n := 0
	out := &Output{Emit: func(Run) error { n++; return stop }}
	err := Import("openai-chat", "f.jsonl", strings.NewReader(line("a")+line("b")+line("c")), Options{}, out)
	assert.ErrorIs(t, err, stop)
	assert.Equal(t, 1, n)
}

// TestNonTextPartsCounted: an image in a message's content is left out of
// its text and counted, in every shape of the file and in mini-swe-agent.
func TestNonTextPartsCounted(t *testing.T) {
	msgs := `[{"role": "user", "content": [{"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": "data:,"}}]}, {"role": "assistant", "content": "a cat"}]`
	for _, tt := range []struct{ format, data string }{
		{"openai-chat", msgs},
		{"openai-chat", `{"messages": ` + msgs + "}\n" + `{"messages": ` + msgs + "}\n"},
		{"mini-swe-agent", `{"messages": ` + msgs + `}`},
	} {
		var runs []Run
		out := &Output{Emit: func(r Run) error { runs = append(runs, r); return nil }}
		require.NoError(t, Import(tt.format, "f.json", strings.NewReader(tt.data), Options{}, out), tt.data)
		assert.Equal(t, "what is this?", runs[0].Events[0].Text)
		assert.Equal(t, []Skipped{{nonTextPart, len(runs)}}, out.Skipped(), tt.data)
	}
}

// TestLegacyFunctionCall: an assistant's function_call (the form before
// tool_calls) is a tool call, paired with the function message after it.
func TestLegacyFunctionCall(t *testing.T) {
	data := `[{"role": "user", "content": "weather?"},
{"role": "assistant", "content": null, "function_call": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}},
{"role": "function", "name": "get_weather", "content": "rain"},
{"role": "assistant", "content": "Rain."}]`
	runs, err := importData("openai-chat", "f.json", []byte(data), Options{})
	require.NoError(t, err)
	assert.Equal(t, []string{"input", "message", "tool_call get_weather", "tool_result get_weather", "final"}, eventKinds(runs[0].Events))
	assert.JSONEq(t, `{"city": "Oslo"}`, string(runs[0].Events[2].Args))
	_, err = importData("openai-chat", "f.json", []byte(`[{"role": "assistant", "function_call": {"arguments": "{}"}}]`), Options{})
	assert.ErrorContains(t, err, "f.json: messages[0]: function_call: no function name")
}
