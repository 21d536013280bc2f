package replay_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/internal/cascade"
	"github.com/agentstop/agentstop/replay"
	. "github.com/agentstop/agentstop/termination"
)

// TestReplayRunsRules: the rules of §8 over a log, one case each.
func TestReplayRunsRules(t *testing.T) {
	ev := func(run, parent string, k Kind) Event {
		return Event{Kind: k, Tool: "t", Log: &LogFields{Run: run, Parent: parent}}
	}
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	at := func(e Event, s int) Event { e.Time = t0.Add(time.Duration(s) * time.Second); return e }
	type want struct {
		run, parent string
		cause       Cause
		events      int
		stoppedAt   int
	}
	cases := []struct {
		name   string
		policy string
		log    []Event
		want   []want
	}{
		{
			name: "one run without ids", policy: "max_tool_calls: 1",
			log:  []Event{{Kind: KindToolCall}, {Kind: KindToolCall}, {Kind: KindToolCall}},
			want: []want{{"", "", MaxToolCallsReached{Limit: 1, Count: 2}, 2, 2}},
		},
		{
			name: "a run ends at its last line and cascades", policy: "{}",
			log: []Event{ev("p", "", KindInput), ev("c", "p", KindInput), ev("g", "c", KindInput), ev("p", "", KindFinal), ev("c", "", KindMessage), ev("g", "", KindMessage)},
			want: []want{
				{"p", "", NaturalCompletion{}, 2, 0},
				{"c", "p", cascade.ParentEnded("replay", "natural_completion"), 1, 0},
				{"g", "c", cascade.ParentEnded("replay", "natural_completion"), 1, 0},
			},
		},
		{
			name: "a child's end never ends its parent", policy: "max_tool_calls: 1",
			log: []Event{ev("p", "", KindInput), ev("c", "p", KindToolCall), ev("c", "", KindToolCall), ev("p", "", KindMessage)},
			want: []want{
				{"c", "p", MaxToolCallsReached{Limit: 1, Count: 2}, 2, 2},
				{"p", "", NaturalCompletion{}, 2, 0},
			},
		},
		{
			name: "late child", policy: "{}",
			log: []Event{ev("p", "", KindFinal), ev("c", "p", KindMessage), ev("c", "", KindMessage)},
			want: []want{
				{"p", "", NaturalCompletion{}, 1, 0},
				{"c", "p", Skipped{Reason: SkipParentEnded, Detail: "replay ended: natural_completion"}, 0, 0},
			},
		},
		{
			name: "tree limit from a grandchild; the holder's own event", policy: "tree: {max_tool_calls: 2}",
			log: []Event{ev("p", "", KindToolCall), ev("c", "p", KindInput), ev("g", "c", KindToolCall), ev("g", "", KindToolCall), ev("c", "", KindMessage), ev("p", "", KindMessage)},
			want: []want{
				{"p", "", MaxToolCallsReached{Limit: 2, Count: 3, Scope: ScopeTree}, 1, 0},
				{"c", "p", cascade.ParentEnded("replay", "max_tool_calls"), 1, 0},
				{"g", "c", cascade.ParentEnded("replay", "max_tool_calls"), 2, 0},
			},
		},
		{
			name: "a holder's own event crosses its tree limit", policy: "tree: {max_tool_calls: 1}",
			log:  []Event{ev("p", "", KindToolCall), ev("p", "", KindToolCall)},
			want: []want{{"p", "", MaxToolCallsReached{Limit: 1, Count: 2, Scope: ScopeTree}, 2, 2}},
		},
		{
			name: "a tree timeout fires before the first line of the subtree past it", policy: "tree: {timeout: 3s}",
			log: []Event{at(ev("p", "", KindInput), 0), at(ev("c", "p", KindMessage), 1), at(ev("c", "", KindMessage), 2),
				at(ev("c", "", KindMessage), 5), at(ev("p", "", KindFinal), 6)},
			want: []want{
				{"p", "", Timeout{Limit: 3 * time.Second, Elapsed: 3 * time.Second, Scope: ScopeTree}, 1, 0},
				{"c", "p", cascade.ParentEnded("replay", "timeout"), 2, 0},
			},
		},
		{
			name: "a remote parent is recorded only", policy: "{}",
			log:  []Event{ev("c", "elsewhere", KindMessage)},
			want: []want{{"c", "elsewhere", NaturalCompletion{}, 1, 0}},
		},
		{
			name: "lines after a run stopped are not evaluated or rolled up", policy: "{max_tool_calls: 1, tree: {max_tool_calls: 3}}",
			log: []Event{ev("p", "", KindInput), ev("c", "p", KindToolCall), ev("c", "", KindToolCall), ev("c", "", KindToolCall), ev("c", "", KindToolCall), ev("p", "", KindToolCall)},
			want: []want{
				{"c", "p", MaxToolCallsReached{Limit: 1, Count: 2}, 2, 2},
				{"p", "", NaturalCompletion{}, 2, 0},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := MustParsePolicy(c.policy)
			got := replay.Runs(&p, c.log)
			require.Len(t, got, len(c.want))
			for i, w := range c.want {
				g := got[i]
				assert.Equal(t, w, want{g.Run, g.Parent, g.Cause, g.Events, g.StoppedAt}, "result %d", i)
				assert.Equal(t, "replay", g.Stage)
			}
		})
	}
}

func TestReplayRunsStageAndNilPolicy(t *testing.T) {
	log := []Event{{Kind: KindInput, Log: &LogFields{Run: "p"}}, {Kind: KindInput, Log: &LogFields{Run: "c", Parent: "p"}}, {Kind: KindFinal, Log: &LogFields{Run: "p"}}, {Kind: KindMessage, Log: &LogFields{Run: "c"}}}
	got := replay.Runs(nil, log, replay.WithStage("planner"), nil)
	require.Len(t, got, 2)
	assert.Equal(t, "planner", got[0].Stage)
	assert.Equal(t, Cancelled{Reason: CancelParent, Detail: "planner ended: natural_completion"}, got[1].Cause)
	assert.Empty(t, replay.Runs(nil, nil))
}

// TestTreePressureWarnsDescendants: a tree pressure warning reaches the
// holder and its live descendants, not runs that have ended.
func TestReplayRunsTreeWarnings(t *testing.T) {
	p := MustParsePolicy("tree: {token_budget: {total: 100, pressure: 0.5}}")
	spend := func(run, parent string, n int64) Event {
		return Event{Kind: KindMessage, Usage: Usage{InputTokens: n}, Log: &LogFields{Run: run, Parent: parent}}
	}
	log := []Event{spend("p", "", 10), spend("done", "p", 1), spend("c", "p", 10), spend("g", "c", 30), spend("p", "", 1), spend("c", "", 1), spend("g", "", 1)}
	got := replay.Runs(&p, log)
	w := BudgetPressure{Resource: ResourceTotalTokens, Threshold: 0.5, Used: 51, Limit: 100, Scope: ScopeTree}
	for _, r := range got {
		switch r.Run {
		case "done":
			assert.Empty(t, r.Warnings, "ended before the warning")
		case "g":
			// g also holds the tree limit over itself: 30+1 of 100 never warns.
			assert.Equal(t, []Cause{w}, r.Warnings, r.Run)
		default:
			assert.Contains(t, r.Warnings, Cause(w), r.Run)
		}
	}
}

// FuzzReplayRunsTree: whatever a policy's tree: holds and however a log's
// runs name their parents, parsing reports an error naming a policy key or a valid tree,
// and replay.Runs returns one result per run without panicking.
// policyKeyError is the form of ParsePolicy's errors: the key path from
// "policy" ("policy", "policy.tree.timeout", "policy.any[1]"), then what
// is wrong.
var policyKeyError = regexp.MustCompile(`^policy([.\[][^\n]*)?: \S`)

func FuzzReplayRunsTree(f *testing.F) {
	for _, s := range []string{
		`tree: {max_tool_calls: 2}`, `tree: {max_iterations: {limit: 3, pressure: 0.5}, token_budget: {total: 100, pressure: 0.5, grace: 0}}`,
		`tree: {cost_budget: {limit: 0.1}, timeout: 1s}`, `tree: {}`, `tree: {stall: {repeats: 2}}`, `any: [{tree: {max_iterations: 1}}]`,
		`{max_iterations: 2, tree: {max_tool_calls: {per_tool: {t: 1}}}}`, `tree: [1]`, `tree: {timeout: -1s}`,
	} {
		f.Add([]byte(s), []byte{0, 1, 2, 1, 0, 3, 2, 2, 1})
	}
	f.Fuzz(func(t *testing.T, policy, shape []byte) {
		p, err := ParsePolicy(policy)
		if err != nil {
			if !policyKeyError.MatchString(err.Error()) {
				t.Fatalf("error %v does not name a key of the policy", err)
			}
			return
		}
		if tr := p.Tree(); tr != nil {
			if err := tr.Validate(); err != nil {
				t.Fatalf("ParsePolicy accepted %q but its tree is invalid: %v", policy, err)
			}
		}
		// Each byte is a line: the run (b%4), a parent on a run's first
		// line (b/4%5: none or run 0..3), the kind.
		kinds := []Kind{KindMessage, KindToolCall, KindToolResult, KindFinal, KindInput}
		var log []Event
		seen := map[string]bool{}
		t0 := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
		for i, b := range shape {
			run := fmt.Sprint("r", b%4)
			ev := Event{Kind: kinds[int(b/20)%len(kinds)], Tool: "t", Usage: Usage{InputTokens: int64(b % 7)},
				Cost: float64(b%3) / 100, Time: t0.Add(time.Duration(i) * 300 * time.Millisecond),
				Log: &LogFields{Run: run},
			}
			if !seen[run] {
				seen[run] = true
				if q := int(b/4) % 5; q > 0 {
					ev.Log.Parent = fmt.Sprint("r", q-1)
				}
			}
			log = append(log, ev)
		}
		got := replay.Runs(&p, log)
		if len(got) != len(seen) {
			t.Fatalf("%d results for %d runs", len(got), len(seen))
		}
		// Read twice (the index, then a line at a time), the log replays
		// as held whole: late parents and cycles of parents included.
		var text strings.Builder
		for _, ev := range log {
			line, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			text.Write(line)
			text.WriteByte('\n')
		}
		idx := codec.IndexRuns(strings.NewReader(text.String()))
		streamed, _, err := replay.NewRunner(&p, replay.WithIndex(&idx)).Log(strings.NewReader(text.String()))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(streamed, got) {
			t.Fatalf("the Runner with the index gives\n%v\nRuns gives\n%v\nlog:\n%s", streamed, got, text.String())
		}
	})
}

// TestReplayRunsTreeTotals: a holder's result carries its subtree's
// totals beside its own, as live (issue 29): the figures its tree cause
// names; the line that stopped it by its own condition included.
func TestReplayRunsTreeTotals(t *testing.T) {
	spend := func(run, parent string, k Kind, in, out int64, cost float64) Event {
		return Event{Kind: k, Tool: "search", Usage: Usage{InputTokens: in, OutputTokens: out}, Cost: cost, Log: &LogFields{Run: run, Parent: parent}}
	}
	p := MustParsePolicy("tree: {token_budget: {total: 15000}, max_tool_calls: 100}")
	got := replay.Runs(&p, []Event{
		spend("p", "", KindMessage, 1000, 200, 0.01),
		spend("a", "p", KindToolCall, 0, 0, 0), spend("a", "", KindMessage, 6000, 500, 0.1),
		spend("b", "p", KindToolCall, 0, 0, 0), spend("b", "", KindMessage, 7000, 630, 0.2),
		spend("p", "", KindFinal, 10, 10, 0), // not evaluated: p has ended
	})
	require.Len(t, got, 3)
	byRun := map[string]Result{}
	for _, r := range got {
		byRun[r.Run] = r
	}
	holder := byRun["p"]
	assert.Equal(t, BudgetExhausted{Resource: ResourceTotalTokens, Used: 15330, Limit: 15000, Scope: ScopeTree}, holder.Cause)
	assert.Equal(t, Usage{InputTokens: 1000, OutputTokens: 200}, holder.Tokens)
	require.NotNil(t, holder.Tree)
	assert.Equal(t, 3, holder.Tree.Iterations)
	assert.Equal(t, 2, holder.Tree.ToolCalls)
	assert.Equal(t, Usage{InputTokens: 14000, OutputTokens: 1330}, holder.Tree.Tokens)
	assert.InDelta(t, 0.31, holder.Tree.Cost, 1e-9)
	for _, r := range []Result{byRun["a"], byRun["b"]} { // every run of a replay holds the policy's tree: limits
		require.NotNil(t, r.Tree, r.Run)
		assert.Equal(t, r.Tokens, r.Tree.Tokens, "a leaf's tree is itself: %s", r.Run)
	}

	own := MustParsePolicy("{max_tool_calls: 1, tree: {max_tool_calls: 10}}")
	got = replay.Runs(&own, []Event{spend("p", "", KindToolCall, 0, 0, 0), spend("p", "", KindToolCall, 0, 0, 0)})
	require.Len(t, got, 1)
	require.NotNil(t, got[0].Tree)
	assert.Equal(t, 2, got[0].Tree.ToolCalls, "the line that stopped the holder is in its tree's totals")

	none := MustParsePolicy("max_tool_calls: 1")
	assert.Nil(t, replay.Runs(&none, []Event{spend("p", "", KindToolCall, 0, 0, 0)})[0].Tree, "no tree: limits, no tree totals")
}
