package termination_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/termination"
)

// TestEventJSON: an Event's JSON form is the contract's flat object (§1),
// its log fields beside the others in the contract's order, and it reads
// back to the same event; an event without log fields has a nil Log.
func TestEventJSON(t *testing.T) {
	at := time.Date(2026, 11, 20, 9, 0, 4, 0, time.UTC)
	cases := []struct {
		name string
		ev   termination.Event
		want string
	}{
		{"plain", termination.Event{Kind: termination.KindToolCall, Tool: "search", Args: json.RawMessage(`{"q":1}`), CallID: "c1"},
			`{"kind":"tool_call","tool":"search","args":{"q":1},"call_id":"c1"}`},
		{"log fields", termination.Event{Kind: termination.KindInput, Text: "<task>", Time: at,
			Log: &termination.LogFields{Run: "r-2", Parent: "r-1", Stage: "plan", Dropped: 3}},
			`{"kind":"input","text":"<task>","time":"2026-11-20T09:00:04Z","run":"r-2","parent":"r-1","stage":"plan","dropped":3}`},
		{"hashes", termination.Event{Kind: termination.KindToolResult, Err: "exit 1", Log: &termination.LogFields{ArgsHash: "a", TextHash: "b"}},
			`{"kind":"tool_result","error":"exit 1","args_hash":"a","text_hash":"b"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			require.NoError(t, enc.Encode(tc.ev))
			assert.Equal(t, tc.want+"\n", b.String(), "the fields in the contract's order, HTML left as it is")
			escaped, err := json.Marshal(tc.ev)
			require.NoError(t, err)
			var plain bytes.Buffer
			json.HTMLEscape(&plain, []byte(tc.want))
			assert.Equal(t, plain.String(), string(escaped), "json.Marshal escapes HTML as for any value")
			var back termination.Event
			require.NoError(t, json.Unmarshal(escaped, &back))
			assert.Equal(t, tc.ev, back)
		})
	}
	var ev termination.Event
	require.NoError(t, json.Unmarshal([]byte(`{"kind":"message","text":"hi","extra":1}`), &ev))
	assert.Nil(t, ev.Log, "no log fields, no LogFields")
	assert.Equal(t, termination.LogFields{}, ev.Logged())
}
