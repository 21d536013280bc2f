package termination

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResultShadowJSON(t *testing.T) {
	r := Result{Stage: "research", Cause: NaturalCompletion{}, Outcome: OutcomeSucceeded, Untimed: true,
		Shadow: map[string]*ShadowVerdict{
			"strict":  {Cause: StallDetected{Signal: SignalRepeatedToolCall, Repeats: 2}, StoppedAt: 7},
			"lenient": nil,
		}}
	b, err := json.Marshal(r)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"shadow":{"lenient":null,"strict":{"cause":{"$kind":"StallDetected","signal":"repeated_tool_call","repeats":2},"stopped_at":7}}`)
	var back Result
	require.NoError(t, json.Unmarshal(b, &back))
	want := r
	want.TerminationCause = "natural_completion"
	want.Fired, want.Warnings = []Cause{}, []Cause{}
	assert.Equal(t, want, back)

	// No shadow policies: no "shadow" key, and none read back.
	r.Shadow = nil
	b, err = json.Marshal(r)
	require.NoError(t, err)
	assert.NotContains(t, string(b), `"shadow"`)
	back = Result{}
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Nil(t, back.Shadow)
}

func TestShadowVerdictJSONErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"stopped_at":3}`, `"cause" is missing`},
		{`{"cause":null,"stopped_at":3}`, `"cause" is missing`},
		{`{"cause":{"$kind":"NoSuchCause"},"stopped_at":3}`, `NoSuchCause`},
		{`{"cause":{"$kind":"NaturalCompletion"},"stopped_at":0}`, `"stopped_at" must be the 1-based index of an event, got 0`},
		{`[]`, `shadow verdict:`},
	} {
		var v ShadowVerdict
		assert.ErrorContains(t, json.Unmarshal([]byte(tc.in), &v), tc.want, tc.in)
	}
	var r Result
	assert.ErrorContains(t, json.Unmarshal([]byte(`{"shadow":{"x":{"stopped_at":1}}}`), &r), `"cause" is missing`)
	_, err := json.Marshal(ShadowVerdict{StoppedAt: 1})
	assert.ErrorContains(t, err, "without a cause")
}

// FuzzShadowVerdicts: a "shadow" object that reads back writes back the
// same and reads back equal.
func FuzzShadowVerdicts(f *testing.F) {
	for _, s := range []string{
		`{"strict":{"cause":{"$kind":"StallDetected","signal":"repeated_tool_call","repeats":2},"stopped_at":7},"lenient":null}`,
		`{}`, `null`, `{"x":{"cause":{"$kind":"All","causes":[{"$kind":"NaturalCompletion"}]},"stopped_at":1}}`,
		`{"x":{"cause":null,"stopped_at":1}}`, `{"x":{"stopped_at":-1}}`, `{"x":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m map[string]*ShadowVerdict
		if err := json.Unmarshal(data, &m); err != nil {
			return
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("read %q as %#v, which does not write: %v", data, m, err)
		}
		var back map[string]*ShadowVerdict
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("wrote %s, which does not read: %v", b, err)
		}
		if !reflect.DeepEqual(m, back) {
			t.Fatalf("round trip changed the verdicts:\n%#v\n%#v", m, back)
		}
	})
}
