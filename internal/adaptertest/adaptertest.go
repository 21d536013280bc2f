// Package adaptertest is a conformance suite for agentstop adapters, in the
// spirit of testing/slogtest: an adapter supplies a [Harness] that drives its
// framework's real loop with a scripted model, and [Run] checks that the
// adapter reports the loop faithfully and that agentstop's stop reaches the
// framework.
//
// The suite checks that:
//   - a conversation that completes yields its events in order (message,
//     tool_call, tool_result, final), ends without a firing condition, and
//     counts every token the model reported exactly once;
//   - a runaway loop (the model calls the same tool forever) is stopped by
//     max_tool_calls and by stall (repeated_tool_call) with the right typed
//     cause;
//   - after the stop the framework's loop really ends: the harness returns
//     and the model is not called again more than once;
//   - where the framework gives them, tool call ids and the model's name
//     reach the events ([Harness.CallIDs], [Harness.Model]);
//   - every run also records through package telemetry's Recorder (an SDK
//     tracer provider with an in-memory span recorder), and its spans
//     follow the events: each answered tool call is one
//     execute_tool {tool} span, child of the run's invoke_agent {stage}
//     span, carrying the framework's call id (gen_ai.tool.call.id) when
//     the harness declares CallIDs; the run's span carries the declared
//     model (gen_ai.request.model); a failed tool result's span has status
//     Error and error.type=tool_error.
//
// It also holds what adapters' own tests share: the suite's scripts
// ([Lookup], [Runaway]) and turns ([NewTurn], [Calls]), a stage that
// records what it evaluates ([NewStage], [Events]), [CheckCallIDs],
// checks of an adapter's decoder and helpers ([DecodeEvents],
// [DiffEvents], [CheckToolResultEvent], [CheckObserveError]), and for
// adapters that drive a provider's real SDK, [Server], a scripted model
// API on 127.0.0.1 started from an [API], with the scenario checks of
// their tool loops ([API.CheckNaturalCompletion],
// [API.CheckTruncatedAnswer], [API.CheckStopCancelsLoop]).
//
// The package is internal: it is the conformance suite of this repository's
// adapters, not a public API in v0.x. Go's internal rule is by import path,
// so the nested modules github.com/agentstop/agentstop/adapters/<framework>
// import it from their tests. No adapter's non-test file may import it (or
// any other internal package of the core): a user's build may pair an
// adapter with a newer core, since the highest required version wins, and an
// internal API may change in any release. TestAdaptersImportNoCoreInternal
// checks that; TestInstallFromProxy installs every adapter from a module
// proxy as a user does.
package adaptertest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentstop/agentstop/internal/canonical"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// ToolCall is a tool call requested by a scripted model turn.
type ToolCall struct {
	Name string
	Args string // JSON
}

// Turn is one scripted model response. A Turn without ToolCalls is the final
// answer.
type Turn struct {
	Text      string
	ToolCalls []ToolCall
	Usage     termination.Usage
	// Stop is the provider's finish or stop reason when it is not the one
	// the turn implies (tool calls, else the end of the turn): "length",
	// "max_tokens", ... Scripted servers put it on the wire as is.
	Stop string
	// Refusal is the text of a refusal, for APIs that report one apart.
	Refusal string
	// CacheRead is the prompt tokens read from a prompt cache, for APIs
	// that report them apart from Usage.InputTokens (Anthropic's
	// cache_read_input_tokens).
	CacheRead int64
}

// NewTurn returns a turn with text, usage (input and output tokens) and
// tool calls given as name and JSON arguments pairs (see [Calls]).
func NewTurn(text string, input, output int64, calls ...string) Turn {
	return Turn{Text: text, ToolCalls: Calls(calls...), Usage: termination.Usage{InputTokens: input, OutputTokens: output}}
}

// Calls returns tool calls from name and JSON arguments, in pairs:
// Calls("search", `{"q":"a"}`, "echo", `{}`).
func Calls(nameArgs ...string) []ToolCall {
	out := make([]ToolCall, 0, len(nameArgs)/2)
	for i := 0; i+1 < len(nameArgs); i += 2 {
		out = append(out, ToolCall{Name: nameArgs[i], Args: nameArgs[i+1]})
	}
	return out
}

// Script is a scripted conversation.
type Script struct {
	Input string
	Turns []Turn
	// Repeat makes the model answer with the last turn forever: a runaway
	// loop that only agentstop can end.
	Repeat bool
}

// TurnAt returns the model's answer to its i-th call (0-based), following
// Repeat; ok is false past the end of a script that does not repeat.
func (s Script) TurnAt(i int) (turn Turn, ok bool) {
	if len(s.Turns) == 0 {
		return Turn{}, false
	}
	if i >= len(s.Turns) {
		if !s.Repeat {
			return Turn{}, false
		}
		i = len(s.Turns) - 1
	}
	return s.Turns[i], true
}

// Report is what a Harness returns for one run.
type Report struct {
	// Result is the run's result: run.Wait() or run.Finish(err).
	Result termination.Result
	// ModelCalls is how many times the framework called the scripted model.
	ModelCalls int
}

// Harness is what an adapter gives the suite.
type Harness struct {
	// Run drives the framework's real loop with a scripted model that
	// answers with script's turns (tools return a short fixed text), wrapped
	// by the adapter under stage, until the framework's loop ends. It must
	// start the run with stage.Start and return its result. It is called on
	// a goroutine of its own; t.Fatal in it fails the suite's subtest.
	Run func(t *testing.T, stage *middleware.Stage, script Script) Report
	// Timeout bounds one run; a loop that does not end by then fails the
	// suite. Default 30s.
	Timeout time.Duration
	// CallIDs says that the framework gives tool calls ids (its scripted
	// model gives each call one) and the adapter reports them: the suite
	// then checks that every tool_call event carries its own call id and
	// every tool_result the id of its call (see [CheckCallIDs]), and that
	// every execute_tool span carries its call's id as
	// gen_ai.tool.call.id.
	CallIDs bool
	// ToolErrorsGoOn says that the loop hands a failed tool's error back
	// to the model and goes on (a tool named "fail" fails): the suite then
	// checks that a stop firing on a tool_result (the errors condition on
	// the second failure) ends the loop before its next model call.
	ToolErrorsGoOn bool
	// Model, when not empty, is the model name the framework reports with
	// the scripted model's responses: the suite checks that every message
	// and final event carries it, and that the run's invoke_agent span
	// carries it as gen_ai.request.model.
	Model string
}

// Run runs the conformance suite against h.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Run == nil {
		t.Fatal("adaptertest: Harness.Run is nil")
	}
	t.Run("Completes", func(t *testing.T) { testCompletes(t, h) })
	t.Run("MaxToolCallsStopsRunaway", func(t *testing.T) {
		testRunaway(t, h, "max_tool_calls: 3",
			termination.MaxToolCallsReached{Limit: 3, Count: 4})
	})
	t.Run("StallStopsRunaway", func(t *testing.T) {
		testRunaway(t, h, "{stall: {repeats: 3}, max_tool_calls: 50}",
			termination.StallDetected{Signal: termination.SignalRepeatedToolCall, Repeats: 3})
	})
	if h.ToolErrorsGoOn {
		t.Run("StopOnToolResult", func(t *testing.T) { testStopOnToolResult(t, h) })
	}
}

func testStopOnToolResult(t *testing.T, h Harness) {
	ss := newSuiteStage(t, "adaptertest_tool_result", "{errors: {total: 2}, max_iterations: 20}", middleware.WithDrainTimeout(2*time.Second))
	rep := runHarness(t, h, ss.stage, Failing)
	ss.checkSpans(t, h, false)
	var failed termination.Failed
	if !errors.As(rep.Result.Cause, &failed) || failed.Reason != termination.FailErrorThreshold {
		t.Fatalf("cause = %#v, want Failed{error_threshold} (a stop on a tool_result must not surface as the next request's error)", rep.Result.Cause)
	}
	if rep.ModelCalls != 2 {
		t.Errorf("model calls = %d, want 2: the stop fired on the second tool result, before the third call", rep.ModelCalls)
	}
}

// The scripts of the suite and of the scenario checks, for adapters'
// scripted models and their own tests.
var (
	// Lookup is the suite's conversation that completes: a tool call, its
	// result, and a final answer, with usage on both model turns.
	Lookup = Script{
		Input: "What is the capital of France?",
		Turns: []Turn{
			{Text: "Let me look that up.", ToolCalls: []ToolCall{{Name: "search", Args: `{"query":"capital of France"}`}},
				Usage: termination.Usage{InputTokens: 120, OutputTokens: 15}},
			{Text: "The capital of France is Paris.", Usage: termination.Usage{InputTokens: 160, OutputTokens: 9}},
		},
	}

	// Runaway is the suite's runaway loop: the model calls the same tool
	// forever. Its turns carry no text, so only the tool calls repeat
	// (repeated_message cannot fire before repeated_tool_call).
	Runaway = Script{
		Input: "Find the CEO of Acme.",
		Turns: []Turn{{
			ToolCalls: []ToolCall{{Name: "search", Args: `{"query":"Acme CEO"}`}},
			Usage:     termination.Usage{InputTokens: 50, OutputTokens: 5},
		}},
		Repeat: true,
	}

	// Failing is a runaway whose every tool call fails (Harness.ToolErrorsGoOn):
	// the loop hands the error back to the model, which calls the tool
	// again.
	Failing = Script{
		Input: "Keep trying.",
		Turns: []Turn{{
			ToolCalls: []ToolCall{{Name: "fail", Args: `{}`}},
			Usage:     termination.Usage{InputTokens: 1, OutputTokens: 1},
		}},
		Repeat: true,
	}

	// Completion is the conversation of [API.CheckNaturalCompletion]: a
	// turn with text and two calls of search, a turn calling a tool named
	// "fail", and the answer.
	Completion = Script{
		Input: "what is it?",
		Turns: []Turn{
			NewTurn("let me look", 100, 20, "search", `{"q":"a"}`, "search", `{"q":"b"}`),
			NewTurn("", 150, 5, "fail", `{}`),
			NewTurn("the answer is 42", 200, 30),
		},
	}
)

// Events collects the events a stage evaluates, in order. It is safe for
// concurrent use.
type Events struct {
	mu     sync.Mutex
	events []termination.Event
}

// All returns a copy of the events collected so far.
func (e *Events) All() []termination.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.events)
}

// Condition returns a condition that records every event into e and never
// fires.
func (e *Events) Condition() termination.Condition {
	return termination.CauseFunc("adaptertest.record", func(ev termination.Event, _ termination.Totals) termination.Cause {
		e.mu.Lock()
		e.events = append(e.events, ev)
		e.mu.Unlock()
		return nil
	})
}

// Kinds returns the kind of every event collected so far, in order.
func (e *Events) Kinds() []string {
	all := e.All()
	out := make([]string, len(all))
	for i, ev := range all {
		out[i] = ev.Kind.String()
	}
	return out
}

// kinds returns the kinds of the loop's own events (message, final,
// tool_call, tool_result), in order.
func (e *Events) kinds() []termination.Kind {
	var ks []termination.Kind
	for _, ev := range e.All() {
		switch ev.Kind {
		case termination.KindMessage, termination.KindFinal, termination.KindToolCall, termination.KindToolResult:
			ks = append(ks, ev.Kind)
		}
	}
	return ks
}

// NewStage returns a stage named name with policy and opts that also
// records every event it evaluates into the returned Events. A bad policy
// or option fails t.
func NewStage(t testing.TB, name, policy string, opts ...middleware.Option) (*middleware.Stage, *Events) {
	t.Helper()
	p, err := termination.ParsePolicy([]byte(policy))
	if err != nil {
		t.Fatalf("adaptertest: policy: %v", err)
	}
	events := &Events{}
	stage, err := middleware.New(name, append([]middleware.Option{middleware.WithPolicy(p), middleware.WithCondition(events.Condition())}, opts...)...)
	if err != nil {
		t.Fatalf("adaptertest: %v", err)
	}
	return stage, events
}

// CheckCallIDs checks that the tool call ids of a framework reach the
// events: every tool_call has a call id of its own, and every tool_result
// carries the call id of an earlier tool_call of the same tool, at most
// once. It returns an error naming the first event that breaks it.
func CheckCallIDs(events []termination.Event) error {
	type call struct {
		tool     string
		answered bool
	}
	calls := map[string]*call{}
	for i, ev := range events {
		switch ev.Kind {
		case termination.KindToolCall:
			if ev.CallID == "" {
				return fmt.Errorf("event %d: tool_call %s has no call id", i, ev.Tool)
			}
			if calls[ev.CallID] != nil {
				return fmt.Errorf("event %d: tool_call %s reuses call id %q", i, ev.Tool, ev.CallID)
			}
			calls[ev.CallID] = &call{tool: ev.Tool}
		case termination.KindToolResult:
			c := calls[ev.CallID]
			switch {
			case ev.CallID == "":
				return fmt.Errorf("event %d: tool_result %s has no call id", i, ev.Tool)
			case c == nil:
				return fmt.Errorf("event %d: tool_result %s has call id %q of no earlier tool_call", i, ev.Tool, ev.CallID)
			case c.tool != ev.Tool:
				return fmt.Errorf("event %d: tool_result %s has call id %q of a call to %s", i, ev.Tool, ev.CallID, c.tool)
			case c.answered:
				return fmt.Errorf("event %d: second tool_result for call id %q", i, ev.CallID)
			}
			c.answered = true
		}
	}
	return nil
}

func runHarness(t *testing.T, h Harness, stage *middleware.Stage, s Script) Report {
	t.Helper()
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	// h.Run runs on its own goroutine so that a loop that never ends fails
	// the test instead of hanging it. A t.Fatal inside h.Run ends that
	// goroutine without a report: exited is closed either way.
	var (
		rep      Report
		returned bool
	)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		rep = h.Run(t, stage, s)
		returned = true
	}()
	select {
	case <-exited:
		if !returned {
			t.FailNow() // h.Run called t.FailNow (t.Fatal): its message is logged
		}
		return rep
	case <-time.After(timeout):
		t.Fatalf("adaptertest: the framework's loop did not end within %s", timeout)
		return Report{}
	}
}

func testCompletes(t *testing.T, h Harness) {
	script := Lookup
	ss := newSuiteStage(t, "adaptertest_completes", "max_tool_calls: 10", middleware.WithDrainTimeout(2*time.Second))
	rec := ss.events
	rep := runHarness(t, h, ss.stage, script)
	res := rep.Result
	ss.checkSpans(t, h, true)
	if n := len(ss.spans.Ended()); h.CallIDs && n != 2 {
		t.Errorf("%d spans ended, want 2: invoke_agent and one execute_tool", n)
	}

	if _, ok := res.Cause.(termination.NaturalCompletion); !ok {
		t.Errorf("cause = %v (%T), want NaturalCompletion", res.Cause, res.Cause)
	}
	want := []termination.Kind{termination.KindMessage, termination.KindToolCall, termination.KindToolResult, termination.KindFinal}
	if got := rec.kinds(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("event kinds = %v, want %v", got, want)
	}
	wantTokens := termination.Usage{InputTokens: 280, OutputTokens: 24}
	if res.Tokens != wantTokens {
		t.Errorf("tokens = %+v, want %+v (usage must be counted exactly once)", res.Tokens, wantTokens)
	}
	if res.Iterations != 2 || res.ToolCalls != 1 {
		t.Errorf("iterations, tool calls = %d, %d; want 2, 1", res.Iterations, res.ToolCalls)
	}
	if rep.ModelCalls != 2 {
		t.Errorf("model calls = %d, want 2", rep.ModelCalls)
	}
	if h.CallIDs {
		if err := CheckCallIDs(rec.All()); err != nil {
			t.Errorf("the framework's tool call ids do not reach the events: %v", err)
		}
	}
	if h.Model != "" {
		for i, ev := range rec.All() {
			if (ev.Kind == termination.KindMessage || ev.Kind == termination.KindFinal) && ev.Model != h.Model {
				t.Errorf("event %d (%s) model = %q, want %q", i, ev.Kind, ev.Model, h.Model)
			}
		}
	}
	for _, ev := range rec.All() {
		if ev.Kind == termination.KindToolCall && (ev.Tool != "search" || canonical.ArgsKey(ev.Args) != canonical.ArgsKey([]byte(`{"query":"capital of France"}`))) {
			t.Errorf("tool_call event = tool %q args %s, want search {\"query\":\"capital of France\"}", ev.Tool, ev.Args)
		}
	}
}

func testRunaway(t *testing.T, h Harness, policy string, want termination.Cause) {
	script := Runaway
	ss := newSuiteStage(t, "adaptertest_runaway", policy, middleware.WithDrainTimeout(2*time.Second))
	rep := runHarness(t, h, ss.stage, script)
	res := rep.Result
	ss.checkSpans(t, h, false)
	if fmt.Sprintf("%#v", res.Cause) != fmt.Sprintf("%#v", want) {
		t.Errorf("cause = %#v, want %#v", res.Cause, want)
	}
	var calls int
	switch c := want.(type) {
	case termination.MaxToolCallsReached:
		calls = c.Count
	case termination.StallDetected:
		calls = c.Repeats
	}
	if rep.ModelCalls > calls+1 {
		t.Errorf("model calls = %d after a stop at tool call %d: the stop did not reach the framework's loop", rep.ModelCalls, calls)
	}
	if res.ToolCalls != calls {
		t.Errorf("tool calls evaluated = %d, want %d", res.ToolCalls, calls)
	}
}
