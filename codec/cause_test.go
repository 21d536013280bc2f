package codec_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/codec"
	. "github.com/agentstop/agentstop/termination"
)

// specCauseKinds is spec §2's table of $kind values, written out by hand: a
// built-in cause missing from the registry fails TestRegistryHasEverySpecKind.
var specCauseKinds = []string{"Completed", "NaturalCompletion", "HandoffRequested", "MaxIterationsReached",
	"MaxToolCallsReached", "BudgetPressure", "BudgetExhausted", "StallDetected", "Timeout", "Cancelled",
	"Failed", "Skipped", "Custom", "All"}

// escalated is a user-defined cause registered by the tests.
type escalated struct {
	Team string `json:"team"`
}

func (escalated) TagValue() string        { return "escalated" }
func (e escalated) Error() string         { return "escalated to " + e.Team }
func (escalated) DefaultOutcome() Outcome { return OutcomeFailed }

// parked is a user-defined cause with its own default outcome.
type parked struct{}

func (parked) TagValue() string        { return "Parked!" } // not a valid label value
func (parked) Error() string           { return "parked" }
func (parked) DefaultOutcome() Outcome { return OutcomeSkipped }

// unregistered is never registered.
type unregistered struct{}

func (unregistered) TagValue() string        { return "unregistered" }
func (unregistered) Error() string           { return "unregistered" }
func (unregistered) DefaultOutcome() Outcome { return OutcomeFailed }

var userKinds = []string{"test.Escalated", "test.Parked"}

func init() {
	if err := codec.RegisterCause[escalated]("test.Escalated"); err != nil {
		panic(err)
	}
	if err := codec.RegisterCause[*parked]("test.Parked"); err != nil {
		panic(err)
	}
}

// causeJSON is every built-in cause with its exact JSON text.
var causeJSON = []struct {
	cause Cause
	json  string
	tag   string
	out   Outcome
}{
	{Completed{Condition: "text_mention", Detail: "TERMINATE"},
		`{"$kind":"Completed","condition":"text_mention","detail":"TERMINATE"}`, "completed", OutcomeSucceeded},
	{NaturalCompletion{}, `{"$kind":"NaturalCompletion"}`, "natural_completion", OutcomeSucceeded},
	{HandoffRequested{Target: "user", Source: "planner"},
		`{"$kind":"HandoffRequested","target":"user","source":"planner"}`, "handoff", OutcomeSucceeded},
	{MaxIterationsReached{Limit: 25, Count: 26}, `{"$kind":"MaxIterationsReached","limit":25,"count":26}`, "max_iterations", OutcomeFailed},
	{MaxToolCallsReached{Limit: 3, Count: 4}, `{"$kind":"MaxToolCallsReached","limit":3,"count":4}`, "max_tool_calls", OutcomeFailed},
	{BudgetPressure{Resource: ResourceTotalTokens, Threshold: 0.8, Used: 16000, Limit: 20000},
		`{"$kind":"BudgetPressure","resource":"total_tokens","threshold":0.8,"used":16000,"limit":20000}`, "budget_pressure", OutcomeSucceeded},
	{BudgetExhausted{Resource: ResourceCost, Used: 2.5, Limit: 2.5},
		`{"$kind":"BudgetExhausted","resource":"cost","used":2.5,"limit":2.5}`, "budget_exhausted", OutcomeFailed},
	{StallDetected{Signal: SignalRepeatedToolCall, Repeats: 3},
		`{"$kind":"StallDetected","signal":"repeated_tool_call","repeats":3}`, "stall", OutcomeFailed},
	{Timeout{Limit: 90 * time.Second, Elapsed: 95*time.Second + 500*time.Millisecond},
		`{"$kind":"Timeout","limit":"1m30s","elapsed":"1m35.5s"}`, "timeout", OutcomeFailed},
	{Cancelled{Reason: CancelContext, Detail: "context canceled"},
		`{"$kind":"Cancelled","reason":"context","detail":"context canceled"}`, "cancelled", OutcomeFailed},
	{Failed{Reason: FailStreamError, Err: "boom"}, `{"$kind":"Failed","reason":"stream_error","error":"boom"}`, "failed", OutcomeFailed},
	{Skipped{Reason: "disabled"}, `{"$kind":"Skipped","reason":"disabled"}`, "skipped", OutcomeSkipped},
	{Custom{Reason: "human_review", Properties: map[string]any{"ticket": "A-1"}},
		`{"$kind":"Custom","reason":"human_review","properties":{"ticket":"A-1"}}`, "custom", OutcomeFailed},
	{All{Causes: []Cause{Completed{Condition: "source_match", Detail: "critic"}, Timeout{Limit: time.Minute, Elapsed: time.Minute}}},
		`{"$kind":"All","causes":[{"$kind":"Completed","condition":"source_match","detail":"critic"},{"$kind":"Timeout","limit":"1m0s","elapsed":"1m0s"}]}`,
		"timeout", OutcomeFailed},
}

func TestCauseJSONRoundTrip(t *testing.T) {
	for _, tc := range causeJSON {
		kind, err := codec.CauseType(tc.cause)
		require.NoError(t, err)
		t.Run(kind, func(t *testing.T) {
			b, err := codec.MarshalCause(tc.cause)
			require.NoError(t, err)
			assert.Equal(t, tc.json, string(b))
			back, err := codec.UnmarshalCause(b)
			require.NoError(t, err)
			assert.Equal(t, tc.cause, back)
			assert.Equal(t, tc.tag, tc.cause.TagValue())
			assert.Equal(t, tc.tag, Tag(tc.cause, nil))
			assert.Equal(t, tc.out, tc.cause.DefaultOutcome())
		})
	}
}

func TestRegistryHasEverySpecKind(t *testing.T) {
	registered := codec.Kinds()
	for _, k := range specCauseKinds {
		assert.Contains(t, registered, k, "spec §2 cause %s is not registered", k)
	}
	// Nothing else is registered but the tests' own user types.
	extra := slices.DeleteFunc(slices.Clone(registered), func(k string) bool {
		return slices.Contains(specCauseKinds, k) || slices.Contains(userKinds, k)
	})
	assert.Empty(t, extra, "registered kinds that spec §2 does not name")
	assert.True(t, slices.IsSorted(registered))

	// Every spec kind has an exact-JSON row above.
	var covered []string
	for _, tc := range causeJSON {
		k, _ := codec.CauseType(tc.cause)
		covered = append(covered, k)
	}
	assert.ElementsMatch(t, specCauseKinds, covered)

	// termination's own JSON forms (here a shadow verdict's) read and
	// write every spec kind as codec does: its table lists the same causes.
	for _, tc := range causeJSON {
		var v ShadowVerdict
		require.NoError(t, json.Unmarshal([]byte(`{"cause":`+tc.json+`,"stopped_at":1}`), &v), tc.json)
		assert.Equal(t, tc.cause, v.Cause)
		b, err := json.Marshal(v)
		require.NoError(t, err)
		c, err := codec.MarshalCause(tc.cause)
		require.NoError(t, err)
		assert.JSONEq(t, `{"cause":`+string(c)+`,"stopped_at":1}`, string(b))
	}
}

func TestUnregisteredCause(t *testing.T) {
	_, err := codec.MarshalCause(unregistered{})
	assert.ErrorIs(t, err, codec.ErrUnregisteredCause)
	assert.ErrorContains(t, err, "codec_test.unregistered")

	_, err = codec.MarshalCause(All{Causes: []Cause{Timeout{}, unregistered{}}})
	assert.ErrorIs(t, err, codec.ErrUnregisteredCause)

	_, err = codec.MarshalCause(nil)
	assert.Error(t, err)

	_, err = codec.UnmarshalCause([]byte(`{"$kind":"Nope"}`))
	assert.ErrorIs(t, err, codec.ErrUnregisteredCause)
	assert.ErrorContains(t, err, `"Nope"`)

	_, err = codec.UnmarshalCause([]byte(`{"$kind":"All","causes":[{"$kind":"Nope"}]}`))
	assert.ErrorIs(t, err, codec.ErrUnregisteredCause)

	for _, bad := range []string{`{}`, `{"reason":"x"}`, `[]`, `"Completed"`, `{"$kind":`, ``, `{"$kind":"Timeout","limit":"soon"}`,
		`{"$kind":"MaxIterationsReached","limit":"3"}`, `{"$kind":"All","causes":[{}]}`} {
		_, err := codec.UnmarshalCause([]byte(bad))
		assert.Error(t, err, bad)
	}
	// A Result that holds an unregistered cause cannot be written.
	_, err = json.Marshal(Result{Cause: unregistered{}})
	assert.ErrorIs(t, err, codec.ErrUnregisteredCause)
}

func TestRegisterCause(t *testing.T) {
	b, err := codec.MarshalCause(escalated{Team: "sre"})
	require.NoError(t, err)
	assert.Equal(t, `{"$kind":"test.Escalated","team":"sre"}`, string(b))
	back, err := codec.UnmarshalCause(b)
	require.NoError(t, err)
	assert.Equal(t, escalated{Team: "sre"}, back)

	b, err = codec.MarshalCause(&parked{})
	require.NoError(t, err)
	assert.Equal(t, `{"$kind":"test.Parked"}`, string(b))
	back, err = codec.UnmarshalCause(b)
	require.NoError(t, err)
	assert.Equal(t, &parked{}, back)

	// Nested in All.
	b, err = codec.MarshalCause(All{Causes: []Cause{escalated{Team: "a"}}})
	require.NoError(t, err)
	back, err = codec.UnmarshalCause(b)
	require.NoError(t, err)
	assert.Equal(t, All{Causes: []Cause{escalated{Team: "a"}}}, back)

	assert.ErrorContains(t, codec.RegisterCause[escalated]("test.Other"), "already registered")
	assert.ErrorContains(t, codec.RegisterCause[unregistered]("Completed"), `kind "Completed" already registered`)
	assert.ErrorContains(t, codec.RegisterCause[unregistered](""), "empty kind")
	_, err = codec.CauseType(unregistered{})
	assert.ErrorIs(t, err, codec.ErrUnregisteredCause, "failed registrations leave no trace")
}

func FuzzCauseJSON(f *testing.F) {
	for _, tc := range causeJSON {
		f.Add([]byte(tc.json))
	}
	for _, s := range []string{
		`{"$kind":"test.Escalated","team":"sre"}`, `{"$kind":"test.Parked"}`, `{"$kind":"Nope"}`, `{}`, `[]`,
		`{"$kind":"All","causes":[{"$kind":"All","causes":null}]}`, `{"$kind":"All"}`,
		`{"$kind":"Timeout","limit":"-1.5h","elapsed":""}`, `{"$kind":"Custom","reason":"r","properties":{"n":1e300,"a":[{}]}}`,
		`{"$kind":"Failed","reason":"panic","error":"\ud800"}`, `{"$kind":"Completed","CONDITION":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := codec.UnmarshalCause(data)
		if err != nil {
			return
		}
		b, err := codec.MarshalCause(c)
		if err != nil {
			t.Fatalf("unmarshalled %q into %#v, which does not marshal: %v", data, c, err)
		}
		c2, err := codec.UnmarshalCause(b)
		if err != nil {
			t.Fatalf("marshalled %#v as %s, which does not unmarshal: %v", c, b, err)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip changed the cause:\n%#v\n%#v\n%s", c, c2, b)
		}
		b2, err := codec.MarshalCause(c2)
		if err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("marshal is not stable: %s vs %s (%v)", b, b2, err)
		}
		_ = Tag(c, func(string) bool { return true })
		_ = c.DefaultOutcome()
		_ = c.Error()
	})
}
