package middleware_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// fakeRecorder records every call, per run.
type fakeRecorder struct {
	mu   sync.Mutex
	runs []*fakeRun
}

type ctxKey struct{}

func (f *fakeRecorder) Join(ctx context.Context, run *middleware.Run) (context.Context, middleware.Part) {
	info := run.Info()
	f.mu.Lock()
	defer f.mu.Unlock()
	r := &fakeRun{stage: info.Stage, info: info}
	f.runs = append(f.runs, r)
	return context.WithValue(ctx, ctxKey{}, r), r
}

func (f *fakeRecorder) only(t *testing.T) *fakeRun {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Len(t, f.runs, 1, "Join calls")
	return f.runs[0]
}

// fakeRun checks the Part contract as it is called: one call at a
// time, nothing after End.
type fakeRun struct {
	mu       sync.Mutex
	stage    string
	info     middleware.RunInfo
	busy     bool
	calls    []string // "event:kind", "warning", "error", "end"
	events   []termination.Event
	warnings []termination.Cause
	errs     []error
	ends     []termination.Result
	misuse   []string
}

func (r *fakeRun) enter(call string) {
	r.mu.Lock()
	if r.busy {
		r.misuse = append(r.misuse, "concurrent call: "+call)
	}
	if len(r.ends) > 0 {
		r.misuse = append(r.misuse, "call after End: "+call)
	}
	r.busy = true
	r.calls = append(r.calls, call)
}

func (r *fakeRun) leave() { r.busy = false; r.mu.Unlock() }

func (r *fakeRun) Event(ev *termination.Event) {
	r.enter("event:" + ev.Kind.String())
	defer r.leave()
	r.events = append(r.events, *ev)
}

func (r *fakeRun) Warning(c termination.Cause) {
	r.enter("warning")
	defer r.leave()
	r.warnings = append(r.warnings, c)
}

func (r *fakeRun) Error(err error) {
	r.enter("error")
	defer r.leave()
	r.errs = append(r.errs, err)
}

func (r *fakeRun) End(res *termination.Result) {
	r.enter("end")
	r.busy = false
	r.ends = append(r.ends, *res)
	r.mu.Unlock()
}

func (r *fakeRun) snapshot() fakeRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fakeRun{stage: r.stage, calls: append([]string(nil), r.calls...), events: append([]termination.Event(nil), r.events...),
		warnings: append([]termination.Cause(nil), r.warnings...), errs: append([]error(nil), r.errs...),
		ends: append([]termination.Result(nil), r.ends...), misuse: append([]string(nil), r.misuse...)}
}

func TestRecorderContract(t *testing.T) {
	rec := &fakeRecorder{}
	var hooked []termination.Cause
	stage := mustStage(t, "recorded",
		policy(t, "{token_budget: {total: 1000, pressure: 0.5}, cost_budget: {limit: 1, pressure: 0.6}, max_tool_calls: 2}"),
		middleware.WithParticipant(rec),
		middleware.WithOnWarning(func(ctx context.Context, _ *middleware.Run, c termination.Cause) {
			hooked = append(hooked, c)
			if len(hooked) == 1 {
				panic("hook failed")
			}
		}),
		shortDrain)
	use := func(in int64, cost float64) termination.Usage { return termination.Usage{InputTokens: in} }
	evs := []termination.Event{
		{Kind: termination.KindInput, Text: "task"},
		{Kind: termination.KindMessage, Text: "a", Usage: use(300, 0)},
		{Kind: termination.KindToolCall, Tool: "search", Args: []byte(`{}`)},
		{Kind: termination.KindMessage, Text: "b", Usage: use(300, 0), Cost: 0.7}, // both warnings at once
		{Kind: termination.KindToolCall, Tool: "search", Args: []byte(`{"q":1}`)},
		{Kind: termination.KindMessage, Text: "c", Usage: use(100, 0)},
		{Kind: termination.KindToolCall, Tool: "search", Args: []byte(`{"q":2}`)}, // max_tool_calls fires
		{Kind: termination.KindMessage, Text: "drained"},
		{Kind: termination.KindMessage, Text: "drained"},
	}
	ctx, run := stage.Start(context.Background())
	assert.NotNil(t, ctx.Value(ctxKey{}), "the context StartRun returns is the run context's parent")
	var n int
	for range middleware.Forward(run, produceIgnoringCtx(t, itemsOf(evs)), decodeItem) {
		n++
	}
	res := run.Wait()
	assert.Equal(t, 7, n)
	assert.Equal(t, termination.MaxToolCallsReached{Limit: 2, Count: 3}, res.Cause)

	fr := rec.only(t).snapshot()
	assert.Empty(t, fr.misuse)
	assert.Equal(t, "recorded", fr.stage)
	require.Len(t, fr.ends, 1, "End exactly once")
	assert.Equal(t, fmt.Sprintf("%#v", res), fmt.Sprintf("%#v", fr.ends[0]), "End gets the final result")
	assert.Equal(t, evs[:7], fr.events, "Event once per evaluated event, in order, drained events excluded")
	assert.Equal(t, res.Warnings, fr.warnings, "Warning once per budget-pressure warning")
	assert.Len(t, fr.warnings, 2)
	assert.Equal(t, fr.warnings, hooked, "OnWarning gets every warning")
	require.Len(t, fr.errs, 1, "the hook's panic is reported")
	assert.Contains(t, fr.errs[0].Error(), "OnWarning hook panicked: hook failed")
	assert.Equal(t, []string{"event:input", "event:message", "event:tool_call", "event:message", "warning", "warning", "error",
		"event:tool_call", "event:message", "event:tool_call", "end"}, fr.calls)
	assert.Equal(t, 2, res.Drained)
}

// produceIgnoringCtx sends every item, whatever happens, then closes.
func produceIgnoringCtx(t *testing.T, items []item) <-chan item {
	ch := make(chan item)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		for _, it := range items {
			ch <- it
		}
	}()
	t.Cleanup(func() { <-done })
	return ch
}

func TestRecorderSkip(t *testing.T) {
	rec := &fakeRecorder{}
	stage := mustStage(t, "skipped", middleware.WithParticipant(rec), policy(t, "timeout: 1ms"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := stage.Skip(ctx, "not needed")
	assert.Equal(t, termination.Skipped{Reason: "not needed"}, res.Cause, "Skipped even with a cancelled context")
	assert.Equal(t, termination.OutcomeSkipped, res.Outcome)
	assert.Equal(t, "skipped", res.Tag())
	assert.Equal(t, "skipped", res.Stage)
	fr := rec.only(t).snapshot()
	assert.Equal(t, []string{"end"}, fr.calls)
	assert.Empty(t, fr.misuse)
}

// nilRecorder returns a nil Part and a nil context: the middleware
// copes.
type nilRecorder struct{}

func (nilRecorder) Join(context.Context, *middleware.Run) (context.Context, middleware.Part) {
	return nil, nil
}

func TestRecorderNil(t *testing.T) {
	stage := mustStage(t, "nilrec", middleware.WithParticipant(nilRecorder{}), policy(t, "max_iterations: 1"))
	ctx, run := stage.Start(context.Background())
	run.Observe(termination.Event{Kind: termination.KindMessage})
	_, stop := run.Observe(termination.Event{Kind: termination.KindMessage})
	assert.True(t, stop)
	assert.Error(t, ctx.Err())
	assert.Equal(t, termination.MaxIterationsReached{Limit: 1, Count: 2}, run.Finish(nil).Cause)
}

// TestRecorderRunInfo: the recorder is told the stage, its provider and
// allow-list, and the run's ids.
func TestRecorderRunInfo(t *testing.T) {
	rec := &fakeRecorder{}
	stage := mustStage(t, "planner", middleware.WithParticipant(rec), middleware.WithProviderName("anthropic"),
		middleware.WithCustomReasons("quota", "manual_review"))
	_, run := stage.Start(context.Background(), middleware.WithAgentID("agent-1"), middleware.WithConversationID("conv-9"))
	run.Finish(nil)
	info := rec.only(t).info
	assert.Equal(t, run.ID(), info.RunID, "every run has an id, with or without a fleet")
	info.RunID = ""
	assert.Equal(t, middleware.RunInfo{Stage: "planner", Provider: "anthropic", AgentID: "agent-1", ConversationID: "conv-9",
		CustomReasons: []string{"quota", "manual_review"}, Policy: termination.Policy{}.Hash()}, info)
	assert.True(t, info.Allowed("quota"))
	assert.False(t, info.Allowed("custom"))

	rec = &fakeRecorder{}
	stage = mustStage(t, "bare", middleware.WithParticipant(rec))
	_, run = stage.Start(context.Background())
	run.Finish(nil)
	info = rec.only(t).info
	info.RunID = ""
	assert.Equal(t, middleware.RunInfo{Stage: "bare", Policy: termination.Policy{}.Hash()}, info, "nothing given: empty fields, the empty policy")
}

// TestRecorderRunInfoPolicy: the recorder is told the enforced policy's
// hash, or "code" for conditions written in Go (§1 end records).
func TestRecorderRunInfoPolicy(t *testing.T) {
	p := termination.MustParsePolicy("max_iterations: 3\ntimeout: 2m\n")
	for _, tc := range []struct {
		name string
		opts []middleware.Option
		want string
	}{
		{"one policy", []middleware.Option{middleware.WithPolicy(p)}, p.Hash()},
		{"a Go condition", []middleware.Option{middleware.WithPolicy(p), middleware.WithCondition(termination.IterationLimits{Limit: 3})}, "code"},
		{"Go tree limits", []middleware.Option{middleware.WithTreeLimits(termination.IterationLimits{Limit: 3})}, "code"},
		{"two policies", []middleware.Option{middleware.WithPolicy(p), middleware.WithPolicy(termination.MustParsePolicy("max_tool_calls: 2"))}, "code"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &fakeRecorder{}
			stage := mustStage(t, "s", append(tc.opts, middleware.WithParticipant(rec))...)
			_, run := stage.Start(context.Background())
			run.Finish(nil)
			assert.Equal(t, tc.want, rec.only(t).info.Policy)
		})
	}
}

func TestWithProviderNameInvalid(t *testing.T) {
	for _, name := range []string{"", "open ai", "tab\tname", strings.Repeat("x", 65)} {
		_, err := middleware.New("s", middleware.WithProviderName(name))
		require.Error(t, err, "%q", name)
		assert.ErrorContains(t, err, "WithProviderName")
	}
}
