package termination

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// specTags is spec §2's closed set of termination_cause values.
var specTags = []string{"completed", "natural_completion", "handoff", "max_iterations", "max_tool_calls",
	"budget_pressure", "budget_exhausted", "stall", "timeout", "cancelled", "failed", "skipped", "custom"}

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

func init() {
	registerTestCause[escalated]("test.Escalated")
	registerTestCause[*parked]("test.Parked")
}

// registerTestCause adds a test's own cause type to the registry, as
// codec.RegisterCause does (codec imports this package).
func registerTestCause[C Cause](kind string) {
	err := causeTable.Register(kind, reflect.TypeFor[C](), func(b []byte) (any, error) {
		var c C
		err := json.Unmarshal(b, &c)
		return c, err
	})
	if err != nil {
		panic(err)
	}
}

// builtinCauses is every built-in cause with its tag and default outcome
// (codec's cause tests hold their exact JSON).
var builtinCauses = []struct {
	cause Cause
	tag   string
	out   Outcome
}{
	{Completed{Condition: conditionTextMention, Detail: "TERMINATE"},
		"completed", OutcomeSucceeded},
	{NaturalCompletion{}, "natural_completion", OutcomeSucceeded},
	{HandoffRequested{Target: "user", Source: "planner"},
		"handoff", OutcomeSucceeded},
	{MaxIterationsReached{Limit: 25, Count: 26}, "max_iterations", OutcomeFailed},
	{MaxToolCallsReached{Limit: 3, Count: 4}, "max_tool_calls", OutcomeFailed},
	{BudgetPressure{Resource: ResourceTotalTokens, Threshold: 0.8, Used: 16000, Limit: 20000},
		"budget_pressure", OutcomeSucceeded},
	{BudgetExhausted{Resource: ResourceCost, Used: 2.5, Limit: 2.5},
		"budget_exhausted", OutcomeFailed},
	{StallDetected{Signal: SignalRepeatedToolCall, Repeats: 3},
		"stall", OutcomeFailed},
	{Timeout{Limit: 90 * time.Second, Elapsed: 95*time.Second + 500*time.Millisecond},
		"timeout", OutcomeFailed},
	{Cancelled{Reason: CancelContext, Detail: "context canceled"},
		"cancelled", OutcomeFailed},
	{Failed{Reason: FailStreamError, Err: "boom"}, "failed", OutcomeFailed},
	{Skipped{Reason: "disabled"}, "skipped", OutcomeSkipped},
	{Custom{Reason: "human_review", Properties: map[string]any{"ticket": "A-1"}},
		"custom", OutcomeFailed},
	{All{Causes: []Cause{Completed{Condition: conditionSourceMatch, Detail: "critic"}, Timeout{Limit: time.Minute, Elapsed: time.Minute}}},
		"timeout", OutcomeFailed},
}

func TestTagValuesAreTheSpecSet(t *testing.T) {
	assert.Equal(t, specTags, TagValues())
	for _, tc := range builtinCauses {
		assert.Contains(t, specTags, tc.cause.TagValue())
		assert.Equal(t, tc.tag, Tag(tc.cause, nil))
		assert.Equal(t, tc.out, defaultOutcome(tc.cause))
	}
}

func TestTag(t *testing.T) {
	allowReview := func(s string) bool { return s == "human_review" || s == "escalated" }
	allowAll := func(string) bool { return true }
	cases := []struct {
		name    string
		cause   Cause
		allowed func(string) bool
		want    string
	}{
		{"built-in ignores the allow-list", Timeout{}, allowAll, "timeout"},
		{"custom allowed", Custom{Reason: "human_review"}, allowReview, "human_review"},
		{"custom not allowed", Custom{Reason: "other"}, allowReview, "custom"},
		{"custom with nil allow-list", Custom{Reason: "human_review"}, nil, "custom"},
		{"custom reason that is no label value", Custom{Reason: "Human Review"}, allowAll, "custom"},
		{"custom reason with a dash", Custom{Reason: "human-review"}, allowAll, "custom"},
		{"empty custom reason", Custom{}, allowAll, "custom"},
		{"custom reason of 64 chars", Custom{Reason: strings.Repeat("a", 64)}, allowAll, strings.Repeat("a", 64)},
		{"custom reason of 65 chars", Custom{Reason: strings.Repeat("a", 65)}, allowAll, "custom"},
		{"user type allowed", escalated{}, allowReview, "escalated"},
		{"user type not allowed", escalated{}, func(string) bool { return false }, "custom"},
		{"user type with nil allow-list", escalated{}, nil, "custom"},
		{"user type with an invalid value", &parked{}, allowAll, "custom"},
		{"All gives its last cause's tag", All{Causes: []Cause{Custom{Reason: "human_review"}, Timeout{}}}, allowReview, "timeout"},
		{"All with an allowed custom last", All{Causes: []Cause{Timeout{}, Custom{Reason: "human_review"}}}, allowReview, "human_review"},
		{"All with a disallowed custom last", All{Causes: []Cause{Timeout{}, Custom{Reason: "x"}}}, allowReview, "custom"},
		{"nested All", All{Causes: []Cause{All{Causes: []Cause{escalated{}}}}}, allowReview, "escalated"},
		{"empty All", All{}, allowAll, "custom"},
		{"nil", nil, allowAll, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Tag(tc.cause, tc.allowed)
			assert.Equal(t, tc.want, got)
			if tc.cause != nil && tc.allowed == nil {
				assert.Contains(t, specTags, got, "without an allow-list only the closed set is emitted")
			}
		})
	}
}

func TestDefaultOutcome(t *testing.T) {
	cases := []struct {
		cause Cause
		want  Outcome
	}{
		{All{Causes: []Cause{Timeout{}, Completed{}}}, OutcomeSucceeded},
		{All{Causes: []Cause{Completed{}, Skipped{}}}, OutcomeSkipped},
		{All{}, OutcomeFailed},
		{escalated{}, OutcomeFailed},
		{&parked{}, OutcomeSkipped},
		{nil, 0},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, defaultOutcome(tc.cause), "%#v", tc.cause)
	}
	assert.Equal(t, "unknown", Outcome(0).String())
	for _, o := range []Outcome{OutcomeSucceeded, OutcomeSkipped, OutcomeFailed} {
		b, err := o.MarshalText()
		require.NoError(t, err)
		var back Outcome
		require.NoError(t, back.UnmarshalText(b))
		assert.Equal(t, o, back)
	}
	var o Outcome
	assert.Error(t, o.UnmarshalText([]byte("ok")))
}

func TestResultJSON(t *testing.T) {
	r := Result{
		Stage: "research", Cause: MaxToolCallsReached{Limit: 3, Count: 4}, Outcome: OutcomeFailed,
		Fired:     []Cause{MaxToolCallsReached{Limit: 3, Count: 4}},
		StoppedAt: 12, Totals: Totals{Events: 12, Iterations: 5, ToolCalls: 4,
			Tokens: Usage{InputTokens: 1200, OutputTokens: 340}}, Evidence: []int{12}, Duration: 41 * time.Second,
	}
	b, err := json.Marshal(r)
	require.NoError(t, err)
	assert.Equal(t, `{"stage":"research","termination_cause":"max_tool_calls","outcome":"failed",`+
		`"cause":{"$kind":"MaxToolCallsReached","limit":3,"count":4},`+
		`"fired":[{"$kind":"MaxToolCallsReached","limit":3,"count":4}],"warnings":[],`+
		`"stopped_at":12,"events":12,"iterations":5,"tool_calls":4,"tokens":{"input":1200,"output":340},"cost":0,"evidence":[12],"duration":"41s"}`, string(b))
	var back Result
	require.NoError(t, json.Unmarshal(b, &back))
	want := r
	want.TerminationCause = "max_tool_calls"
	want.Warnings = []Cause{}
	assert.Equal(t, want, back)

	// An allow-listed custom tag set by the stage is written as is.
	r = Result{Cause: Custom{Reason: "human_review"}, TerminationCause: "human_review", Outcome: OutcomeSucceeded}
	b, err = json.Marshal(r)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"termination_cause":"human_review","outcome":"succeeded","cause":{"$kind":"Custom","reason":"human_review","properties":null}`)
	assert.Contains(t, string(b), `"evidence":[]`, "evidence is always an array")
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Nil(t, back.Evidence, "no evidence reads back as nil, as a Result has it")

	// A zero Result has a null cause.
	b, err = json.Marshal(Result{})
	require.NoError(t, err)
	assert.Contains(t, string(b), `"termination_cause":"","outcome":"unknown","cause":null,"fired":[]`)
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Nil(t, back.Cause)

	// A replay in which no event carried a time has no duration; a lenient
	// replay that reached a truncated last line says so.
	r = Result{Cause: NaturalCompletion{}, Outcome: OutcomeSucceeded, Untimed: true, Truncated: true}
	b, err = json.Marshal(r)
	require.NoError(t, err)
	assert.NotContains(t, string(b), `"duration"`)
	assert.True(t, strings.HasSuffix(string(b), `,"truncated":true}`), string(b))
	back = Result{}
	require.NoError(t, json.Unmarshal(b, &back))
	assert.True(t, back.Untimed)
	assert.True(t, back.Truncated)
	r = Result{Cause: NaturalCompletion{}, Outcome: OutcomeSucceeded, Duration: 90 * time.Second}
	b, err = json.Marshal(r)
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(string(b), `,"duration":"1m30s"}`), string(b))
	assert.ErrorContains(t, json.Unmarshal([]byte(`{"duration":"soon"}`), &back), `duration: must be a duration such as 41s or 1m30s, got "soon"`)
}

func TestCauseErrorsAs(t *testing.T) {
	var err error = Failed{Reason: FailPanic, Err: "x"}
	var f Failed
	assert.True(t, errors.As(err, &f))
	assert.Equal(t, FailPanic, f.Reason)
}

// A Custom cause without a reason still says what it is.
func TestCustomWithoutReasonError(t *testing.T) {
	assert.Equal(t, "agentstop: stopped (custom, no reason given)", Custom{}.Error())
	assert.Equal(t, "agentstop: stopped: human_review", Custom{Reason: "human_review"}.Error())
}
