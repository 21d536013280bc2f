package importer

import (
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestJSONLinesFormatGivenADocument: a JSON document (another agent's
// pretty-printed file, an array) given to a format that reads only JSON
// Lines is an error on its first line that says so and names the formats
// that read documents, never encoding/json's "unexpected end of JSON
// input"; a line of JSON Lines that ends inside a value says that.
func TestJSONLinesFormatGivenADocument(t *testing.T) {
	gemini, err := os.ReadFile("testdata/gemini-session.json")
	require.NoError(t, err)
	const docs = "the formats that read a JSON document are openai-chat, mini-swe-agent, swe-agent, otlp, gemini-cli"
	const pretty = "the file is a JSON document, not JSON Lines (one JSON object per line): its first object does not end on its first line (a pretty-printed object), and -from "
	const array = "the file is a JSON document, not JSON Lines (one JSON object per line): it starts with an array, and -from "
	const meta = `{"timestamp":"2025-06-01T10:00:00Z","type":"session_meta","payload":{"id":"s1"}}` + "\n"
	for _, tc := range []struct {
		name, format, text, want string
		document                 bool
	}{
		{"a Gemini CLI session, codex", "codex", string(gemini), "f.json: line 1: " + pretty + "codex reads JSON Lines; " + docs, true},
		{"a Gemini CLI session, claude-code", "claude-code", string(gemini), "f.json: line 1: " + pretty + "claude-code reads JSON Lines; " + docs, true},
		{"after a byte-order mark and blank lines", "codex", "\uFEFF\n\n{\n  \"messages\": []\n}\n", "f.json: line 3: " + pretty + "codex reads JSON Lines; " + docs, true},
		{"an array on one line", "codex", `[{"type":"session_meta"}]` + "\n", "f.json: line 1: " + array + "codex reads JSON Lines; " + docs, true},
		{"an array over lines", "claude-code", "[\n  {\"type\": \"user\"}\n]\n", "f.json: line 1: " + array + "claude-code reads JSON Lines; " + docs, true},
		{"a later line split", "codex", meta + "{\"type\":\n\"response_item\"}\n", "f.json: line 2: malformed JSON: the line ends inside a value (an object over several lines, or one cut short)", false},
		{"a one-line file cut short", "codex", `{"timestamp":"2025-06-01T10:00:00Z","ty`, "f.json: line 1: malformed JSON: the file looks truncated (its last line ends inside a value)", false},
		{"a whole first line of another agent", "codex", `{"sessionId":"x","messages":[]}` + "\n", "f.json: line 1: no type (want a Codex rollout line)", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := importData(tc.format, "f.json", []byte(tc.text), Options{})
			require.Error(t, err)
			if tc.document {
				assert.EqualError(t, err, tc.want)
			} else {
				assert.ErrorContains(t, err, tc.want)
			}
			assert.Equal(t, tc.document, errors.Is(err, errJSONDocument))
			assert.NotContains(t, err.Error(), "unexpected end of JSON input")
			var ee *EntryError
			assert.True(t, errors.As(err, &ee), "an *EntryError naming the line")
		})
	}
	runs, err := importData("gemini-cli", "f.json", gemini, Options{})
	require.NoError(t, err, "gemini-cli reads the document")
	assert.Len(t, runs, 1)
}

// TestDocumentFormats: the formats the error names are those that read a
// JSON document; the JSON Lines ones are not among them.
func TestDocumentFormats(t *testing.T) {
	assert.Equal(t, []string{"openai-chat", "mini-swe-agent", "swe-agent", "otlp", "gemini-cli"}, documentFormats())
	for _, f := range []string{"openai-chat", "mini-swe-agent", "swe-agent", "otlp", "gemini-cli"} {
		_, err := importData(f, "f.json", []byte("{\n  \"x\": [\n"), Options{})
		assert.False(t, errors.Is(err, errJSONDocument), "%s reads documents: its own error, %v", f, err)
	}
}

// TestOpenAIChatLinesCutShort: openai-chat's JSON Lines say what is wrong
// with a line that is not JSON as the agents' formats do — a last line
// cut short is a truncated file, an earlier line that ends inside a value
// an object over several lines — and never in encoding/json's words.
func TestOpenAIChatLinesCutShort(t *testing.T) {
	const first = `{"messages":[{"role":"user","content":"hi"}]}` + "\n"
	for _, tc := range []struct{ name, text, want string }{
		{"the last line cut short", first + `{"messages":[{"role":"user","content":"h`, "f.jsonl: line 2: malformed JSON: the file looks truncated (its last line ends inside a value)"},
		{"an object over two lines", first + "{\"messages\":[{\"role\":\"user\",\n\"content\":\"h\"}]}\n", "f.jsonl: line 2: malformed JSON: the line ends inside a value (an object over several lines, or one cut short)"},
		{"a fault inside a line", first + `{"messages":[{"role" "user"}]}` + "\n", `f.jsonl: line 2: malformed JSON at byte 22 of the line: invalid character '"' after object key (a JSON Lines file holds one whole value per line)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := importData("openai-chat", "f.jsonl", []byte(tc.text), Options{})
			require.EqualError(t, err, tc.want)
			var ee *EntryError
			assert.True(t, errors.As(err, &ee), "an *EntryError naming the line")
		})
	}
}
