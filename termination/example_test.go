package termination_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentstop/agentstop/termination"
)

// Evaluate a live run event by event. One Condition serves any number of
// runs; each run gets its own Evaluator.
func ExampleNewEvaluator() {
	cond := termination.AnyOf(
		termination.IterationLimits{Limit: 2},
		termination.TokenLimits{Total: 1000, Pressure: 0.8},
	)
	// These events are a recording (they carry no time), so the Evaluator
	// runs on the events' clock: the zero start. A live loop passes
	// time.Now(), or its timeouts and idle limits never fire.
	ev := termination.NewEvaluator(cond, time.Time{})
	for _, e := range []termination.Event{
		{Kind: termination.KindInput, Text: "Plan a trip."},
		{Kind: termination.KindMessage, Text: "Day 1 ...", Usage: termination.Usage{InputTokens: 500, OutputTokens: 350}},
		{Kind: termination.KindMessage, Text: "Day 2 ...", Usage: termination.Usage{InputTokens: 60, OutputTokens: 40}},
		{Kind: termination.KindMessage, Text: "Day 3 ..."},
	} {
		if cause, stop := ev.Observe(e); stop {
			fmt.Println("stop:", cause)
			break
		}
	}
	res := ev.Result()
	for _, w := range res.Warnings {
		fmt.Println("warning:", w)
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	// Output:
	// stop: agentstop: max iterations reached (3 > limit 2)
	// warning: agentstop: budget pressure on total_tokens (850 of 1000 used, threshold 0.8)
	// {"stage":"","termination_cause":"max_iterations","outcome":"failed","cause":{"$kind":"MaxIterationsReached","limit":2,"count":3},"fired":[{"$kind":"MaxIterationsReached","limit":2,"count":3}],"warnings":[{"$kind":"BudgetPressure","resource":"total_tokens","threshold":0.8,"used":850,"limit":1000}],"stopped_at":4,"events":4,"iterations":3,"tool_calls":0,"tokens":{"input":560,"output":390},"cost":0,"evidence":[4]}
}

// Tag keeps the termination_cause label set closed: a Custom reason is its
// own label only when the stage allow-lists it.
func ExampleTag() {
	allowed := func(reason string) bool { return reason == "human_review" }
	fmt.Println(termination.Tag(termination.Custom{Reason: "human_review"}, allowed))
	fmt.Println(termination.Tag(termination.Custom{Reason: "user 42 gave up"}, allowed))
	fmt.Println(termination.Tag(termination.Timeout{}, allowed))
	// Output:
	// human_review
	// custom
	// timeout
}

// A typo in a policy is an error naming the key, never a silently disabled
// guard.
func ExampleParsePolicy_error() {
	_, err := termination.ParsePolicy([]byte("token_budget:\n  total: 100000\n  presure: 0.8\n"))
	fmt.Println(err)
	// Output:
	// policy.token_budget.presure: unknown key (did you mean "pressure"?) (line 3)
}

// Limit one tool, warn before the overall cap, and catch a ping-pong
// between two tools: the warnings come first (the loop's cue to tell the
// agent), then the stop.
func ExampleToolCallLimits() {
	cond := termination.AnyOf(
		termination.ToolCallLimits{Limit: 20, Pressure: 0.1, PerTool: map[string]int{"web_fetch": 5}},
		termination.StallLimits{Repeats: 3, WarnAt: 2, Cycle: 3},
	)
	ev := termination.NewEvaluator(cond, time.Now()) // a live loop: the run starts now
	search := termination.Event{Kind: termination.KindToolCall, Tool: "search", Args: []byte(`{"q":"Acme CEO"}`)}
	fetch := termination.Event{Kind: termination.KindToolCall, Tool: "web_fetch", Args: []byte(`{"url":"https://acme.example"}`)}
	for _, e := range []termination.Event{search, fetch, search, fetch, search, fetch, search} {
		if cause, stop := ev.Observe(e); stop {
			fmt.Println("stop:", cause)
			break
		}
	}
	for _, w := range ev.Result().Warnings {
		fmt.Println("warning:", w)
	}
	// Output:
	// stop: agentstop: stall detected (cycle of 2 calls, 3 repeats)
	// warning: agentstop: budget pressure on tool_calls (2 of 20 used, threshold 0.1)
	// warning: agentstop: stall detected (repeated_tool_call, 2 repeats)
}

// A coding agent's stall guard: with SameResult, re-running the tests after
// each edit is progress as long as their output changes; the same output a
// third time is a stall, and the evidence names the three results.
func ExampleStallLimits_sameResult() {
	guard := termination.StallLimits{Repeats: 3, Window: 8, SameResult: true}
	run := func(outputs ...string) termination.Result {
		ev := termination.NewEvaluator(guard, time.Now())
		for _, out := range outputs {
			ev.Observe(termination.Event{Kind: termination.KindToolCall, Tool: "bash", Args: []byte(`{"cmd":"go test ./..."}`)})
			ev.Observe(termination.Event{Kind: termination.KindToolResult, Tool: "bash", Text: out, Err: "exit status 1"})
		}
		return ev.Result()
	}
	progress := run("FAIL: 3 tests", "FAIL: 2 tests", "FAIL: 1 test")
	fmt.Println(progress.Tag())
	stuck := run("FAIL: TestParse", "FAIL: TestParse\n", "  FAIL: TestParse")
	fmt.Println(stuck.Cause, stuck.Evidence)
	// Output:
	// natural_completion
	// agentstop: stall detected (repeated_result, 3 repeats) [2 4 6]
}

// The signs that a run is done, as one value: a critic's TERMINATE, a
// handoff to the user or a stop event, whichever comes first; and a
// predicate of your own with CauseFunc.
func ExampleCompletionSignals() {
	cond := termination.AnyOf(
		termination.CompletionSignals{TextMention: "TERMINATE", TextSources: []string{"critic"}, Handoff: []string{"user"}, StopMessage: true},
		termination.CauseFunc("tests_pass", func(ev termination.Event, _ termination.Totals) termination.Cause {
			if ev.Kind == termination.KindToolResult && ev.Tool == "run_tests" && ev.Err == "" {
				return termination.Completed{Condition: "predicate", Detail: "tests_pass"}
			}
			return nil
		}),
	)
	fmt.Println(cond)
	for _, events := range [][]termination.Event{
		{{Kind: termination.KindMessage, Source: "writer", Text: "I will not say TERMINATE"}, {Kind: termination.KindMessage, Source: "critic", Text: "TERMINATE"}},
		{{Kind: termination.KindHandoff, Source: "writer", Target: "user"}},
		{{Kind: termination.KindToolCall, Tool: "run_tests"}, {Kind: termination.KindToolResult, Tool: "run_tests", Err: "2 failed"}, {Kind: termination.KindToolResult, Tool: "run_tests"}},
	} {
		ev := termination.NewEvaluator(cond, time.Now())
		for _, e := range events {
			if cause, stop := ev.Observe(e); stop {
				fmt.Printf("%s at event %d: %v\n", cause.TagValue(), ev.Result().StoppedAt, cause)
				break
			}
		}
	}
	// Output:
	// any: [{text_mention: {text: "TERMINATE", sources: ["critic"]}}, {handoff: ["user"]}, {stop_message: true}, {predicate: "tests_pass"}]
	// completed at event 2: agentstop: completed (text_mention "TERMINATE")
	// handoff at event 1: agentstop: handoff from "writer" to "user"
	// completed at event 3: agentstop: completed (predicate "tests_pass")
}
