package middleware_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// item is what the test loops send: an index, to check order, and the
// events it decodes to.
type item struct {
	i   int
	evs []termination.Event
}

func decodeItem(it item) termination.Event {
	if len(it.evs) == 0 {
		return termination.Event{}
	}
	return it.evs[0]
}

func decodeItemEach(it item, emit func(termination.Event)) {
	for _, ev := range it.evs {
		emit(ev)
	}
}

// itemsOf makes one item per event.
func itemsOf(evs []termination.Event) []item {
	items := make([]item, len(evs))
	for i, ev := range evs {
		items[i] = item{i: i, evs: []termination.Event{ev}}
	}
	return items
}

func indices(items []item) []int {
	out := make([]int, len(items))
	for i, it := range items {
		out[i] = it.i
	}
	return out
}

// produce sends items on a new channel until done or ctx ends, then closes
// it: a loop that honours its context.
func produce(ctx interface{ Done() <-chan struct{} }, items []item) <-chan item {
	ch := make(chan item)
	go func() {
		defer close(ch)
		for _, it := range items {
			select {
			case ch <- it:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// seqOf yields items until done or the consumer stops.
func seqOf(items []item) func(func(item, error) bool) {
	return func(yield func(item, error) bool) {
		for _, it := range items {
			if !yield(it, nil) {
				return
			}
		}
	}
}

// runWay runs items through stage one of four ways — 0: Forward, 1:
// ForwardEach, 2: ForwardSeq, 3: Observe — and returns the run and the
// items the consumer received.
func runWay(stage *middleware.Stage, way int, items []item) (*middleware.Run, []item) {
	ctx, run := stage.Start(context.Background())
	var out []item
	switch way {
	case 0:
		for it := range middleware.Forward(run, produce(ctx, items), decodeItem) {
			out = append(out, it)
		}
	case 1:
		for it := range middleware.ForwardEach(run, produce(ctx, items), decodeItemEach) {
			out = append(out, it)
		}
	case 2:
		for it := range middleware.ForwardSeq(run, seqOf(items), decodeItem) {
			out = append(out, it)
		}
	default:
		for _, it := range items {
			out = append(out, it)
			if _, stop := run.Observe(it.evs[0]); stop {
				break
			}
		}
		run.Finish(nil)
	}
	return run, out
}

// replay evaluates the events as agentstop replay would.
func replay(cond termination.Condition, evs []termination.Event) termination.Result {
	e := termination.NewEvaluator(cond, time.Time{})
	for _, ev := range evs {
		if _, stop := e.Observe(ev); stop {
			break
		}
	}
	return e.Result()
}

// sameCounts reports how got (live) differs from want (replay) in the
// fields both paths compute; "" when they agree.
func sameCounts(got, want termination.Result) string {
	var diffs []string
	check := func(name string, g, w any) {
		if fmt.Sprintf("%#v", g) != fmt.Sprintf("%#v", w) {
			diffs = append(diffs, fmt.Sprintf("%s = %#v, want %#v", name, g, w))
		}
	}
	check("Cause", got.Cause, want.Cause)
	check("Outcome", got.Outcome, want.Outcome)
	check("Fired", got.Fired, want.Fired)
	check("Warnings", got.Warnings, want.Warnings)
	check("StoppedAt", got.StoppedAt, want.StoppedAt)
	check("Events", got.Events, want.Events)
	check("Iterations", got.Iterations, want.Iterations)
	check("ToolCalls", got.ToolCalls, want.ToolCalls)
	check("Tokens", got.Tokens, want.Tokens)
	check("Cost", got.Cost, want.Cost)
	check("Budgets", got.Budgets, want.Budgets)
	check("Evidence", got.Evidence, want.Evidence)
	return strings.Join(diffs, "; ")
}

var (
	sources = []string{"assistant", "critic", "user"}
	tools   = []string{"search", "calc", "approve"}
	argsSet = []string{`{"q":"a"}`, `{ "q" : "a" }`, `{"q":"b","n":1}`, `{"n":1,"q":"b"}`, `[]`, ``}
	texts   = []string{"", "thinking", "thinking ", "TERMINATE now", "done", "APPROVE"}
	outputs = []string{"ok", " ok\n", "changed"} // tool results' texts, for stall.same_result
	callIDs = []string{"c1", "c2"}
	kinds   = []termination.Kind{
		termination.KindInput, termination.KindMessage, termination.KindMessage, termination.KindMessage,
		termination.KindToolCall, termination.KindToolCall, termination.KindToolResult, termination.KindToolResult,
		termination.KindHandoff, termination.KindStop, termination.KindError, termination.KindFinal,
	}
)

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// randomEvents returns n random events; handoffs, stops and errors are
// rare so that streams are not stopped at once by every policy.
func randomEvents(r *rand.Rand, n int) []termination.Event {
	evs := make([]termination.Event, n)
	for i := range evs {
		k := pick(r, kinds)
		if (k == termination.KindHandoff || k == termination.KindStop || k == termination.KindError || k == termination.KindFinal) && r.IntN(3) > 0 {
			k = termination.KindMessage
		}
		ev := termination.Event{Kind: k, Source: pick(r, sources)}
		switch k {
		case termination.KindMessage, termination.KindFinal, termination.KindInput, termination.KindStop:
			ev.Text = pick(r, texts)
			if k != termination.KindInput && r.IntN(2) == 0 {
				ev.Usage = termination.Usage{InputTokens: int64(90 + r.IntN(30)), OutputTokens: int64(r.IntN(20))}
				ev.Cost = float64(r.IntN(5)) / 100
			}
		case termination.KindToolCall:
			ev.Tool, ev.Args = pick(r, tools), []byte(pick(r, argsSet))
			if r.IntN(3) == 0 {
				ev.CallID = pick(r, callIDs)
			}
		case termination.KindToolResult:
			ev.Tool = pick(r, tools)
			ev.Text = pick(r, outputs)
			if r.IntN(4) == 0 {
				ev.Err = "tool failed"
			}
			if r.IntN(3) == 0 {
				ev.CallID = pick(r, callIDs)
			}
		case termination.KindHandoff:
			ev.Target = pick(r, []string{"user", "planner"})
		case termination.KindError:
			ev.Err = "loop error"
		}
		evs[i] = ev
	}
	return evs
}

// randomPolicy returns a random policy file (no timeout) with random limits.
func randomPolicy(r *rand.Rand, depth int) string {
	var parts []string
	add := func(format string, args ...any) {
		if r.IntN(4) == 0 {
			parts = append(parts, fmt.Sprintf(format, args...))
		}
	}
	switch r.IntN(8) {
	case 0, 1:
		parts = append(parts, fmt.Sprintf("max_iterations: %d", 1+r.IntN(12)))
	case 2:
		parts = append(parts, fmt.Sprintf("max_iterations: {limit: %d, pressure: 0.%d}", 1+r.IntN(12), 1+r.IntN(9)))
	}
	switch r.IntN(8) {
	case 0:
		parts = append(parts, fmt.Sprintf("max_tool_calls: %d", 1+r.IntN(8)))
	case 1:
		parts = append(parts, fmt.Sprintf("max_tool_calls: {limit: %d, pressure: 0.%d}", 1+r.IntN(8), 1+r.IntN(9)))
	case 2:
		parts = append(parts, fmt.Sprintf("max_tool_calls: {per_tool: {%s: %d}}", pick(r, tools), 1+r.IntN(3)))
	case 3:
		// A per-tool limit is at most the overall one (above, it could never fire: an error).
		limit := 1 + r.IntN(8)
		parts = append(parts, fmt.Sprintf("max_tool_calls: {limit: %d, pressure: 0.5, per_tool: {search: %d, calc: %d}}",
			limit, 1+r.IntN(min(3, limit)), 1+r.IntN(min(3, limit))))
	}
	switch r.IntN(4) {
	case 0:
		parts = append(parts, fmt.Sprintf("token_budget: {total: %d, pressure: 0.%d, grace: %d}", 300+r.IntN(3000), 5+r.IntN(4), r.IntN(3)))
	case 1:
		parts = append(parts, fmt.Sprintf("token_budget: {input: %d, output: %d, pressure: 0.7}", 300+r.IntN(2000), 50+r.IntN(200)))
	}
	add("cost_budget: {limit: %g, pressure: 0.5}", float64(1+r.IntN(20))/100)
	switch repeats := 2 + r.IntN(3); r.IntN(10) {
	case 0, 1:
		parts = append(parts, fmt.Sprintf("stall: {repeats: %d, token_tolerance: 0.%d}", repeats, r.IntN(3)))
	case 2:
		parts = append(parts, fmt.Sprintf("stall: {repeats: %d, window: %d, warn_at: 2}", repeats+1, repeats+1+r.IntN(4)))
	case 3, 5:
		parts = append(parts, fmt.Sprintf("stall: {cycle: %d}", 2+r.IntN(2)))
	case 4:
		parts = append(parts, fmt.Sprintf("stall: {repeats: %d, window: %d, cycle: 2, token_tolerance: 0.1}", repeats, repeats+r.IntN(3)))
	case 6, 7:
		parts = append(parts, fmt.Sprintf("stall: {repeats: %d, window: %d, warn_at: 2, same_result: true}", repeats+1, repeats+1+r.IntN(6)))
	case 8:
		parts = append(parts, fmt.Sprintf("stall: {repeats: %d, window: %d, same_result: true, any_args: true, ignore_tools: [%s]}",
			repeats, repeats+r.IntN(4), pick(r, tools)))
	}
	add("errors: {consecutive: %d, total: %d}", 1+r.IntN(3), 2+r.IntN(4))
	add("errors: {consecutive: %d, total: %d, ignore_tools: [search]}", 1+r.IntN(3), 2+r.IntN(4))
	add("text_mention: {text: TERMINATE}")
	add("text_mention: {text: APPROVE, sources: [critic]}")
	add("function_call: [approve]")
	add("handoff: [user]")
	add("source_match: [critic]")
	add("stop_message: true")
	if depth < 2 && r.IntN(5) == 0 {
		parts = append(parts, fmt.Sprintf("any: [%s, %s]", randomPolicy(r, depth+1), randomPolicy(r, depth+1)))
	}
	if depth < 2 && r.IntN(5) == 0 {
		parts = append(parts, fmt.Sprintf("all: [%s, %s]", nonEmpty(r, depth+1), nonEmpty(r, depth+1)))
	}
	return "{" + dedupKeys(parts) + "}"
}

func nonEmpty(r *rand.Rand, depth int) string {
	for {
		if p := randomPolicy(r, depth); p != "{}" {
			return p
		}
	}
}

// dedupKeys keeps the first of parts with the same key (text_mention may
// be drawn twice).
func dedupKeys(parts []string) string {
	seen := map[string]bool{}
	var out []string
	for _, p := range parts {
		k, _, _ := strings.Cut(p, ":")
		if !seen[k] {
			seen[k] = true
			out = append(out, p)
		}
	}
	return strings.Join(out, ", ")
}

func mustStage(t testing.TB, name string, opts ...middleware.Option) *middleware.Stage {
	t.Helper()
	s, err := middleware.New(name, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func policy(t testing.TB, src string) middleware.Option {
	t.Helper()
	p, err := termination.ParsePolicy([]byte(src))
	if err != nil {
		t.Fatalf("policy %s: %v", src, err)
	}
	return middleware.WithPolicy(p)
}

// shortDrain keeps fault tests fast.
var shortDrain = middleware.WithDrainTimeout(30 * time.Millisecond)
