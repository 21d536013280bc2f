package middleware_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/internal/runid"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// seamPart is a Part with every optional interface: it records what it
// is told, and starts and spends as the test says.
type seamPart struct {
	run      *middleware.Run
	startErr error
	spend    func(u termination.Usage, cost float64) (warning, stop termination.Cause)

	mu      sync.Mutex
	calls   []string
	spent   int64
	endedOK bool // Ended could call the run's methods (no lock held)
}

func (p *seamPart) note(call string) {
	p.mu.Lock()
	p.calls = append(p.calls, call)
	p.mu.Unlock()
}

func (p *seamPart) Event(ev *termination.Event)     { p.note("event:" + ev.Kind.String()) }
func (p *seamPart) Warning(c termination.Cause)     { p.note("warning:" + c.TagValue()) }
func (p *seamPart) Error(error)                     { p.note("error") }
func (p *seamPart) End(res *termination.Result)     { p.note("end:" + res.Tag()) }
func (p *seamPart) Stopped(res *termination.Result) { p.note("stopped:" + res.Tag()) }
func (p *seamPart) Start() error                    { p.note("start"); return p.startErr }
func (p *seamPart) Spend(u termination.Usage, cost float64) (termination.Cause, termination.Cause) {
	p.mu.Lock()
	p.spent += u.InputTokens + u.OutputTokens
	p.mu.Unlock()
	if p.spend == nil {
		return nil, nil
	}
	return p.spend(u, cost)
}

func (p *seamPart) Ended(res *termination.Result) {
	_, stopped := p.run.Cause() // would deadlock if the run's lock were held
	p.mu.Lock()
	p.endedOK = stopped
	p.mu.Unlock()
	p.note("ended")
}

func (p *seamPart) log() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.calls...)
}

// seamParticipant gives every run a seamPart made by part.
type seamParticipant struct {
	part  func(run *middleware.Run) *seamPart
	mu    sync.Mutex
	parts []*seamPart
}

func (s *seamParticipant) Join(ctx context.Context, run *middleware.Run) (context.Context, middleware.Part) {
	p := s.part(run)
	s.mu.Lock()
	s.parts = append(s.parts, p)
	s.mu.Unlock()
	return ctx, p
}

func TestParticipantLifecycle(t *testing.T) {
	sp := &seamParticipant{part: func(run *middleware.Run) *seamPart { return &seamPart{run: run} }}
	stage := mustStage(t, "seam", middleware.WithParticipant(sp), policy(t, "max_iterations: 2"))
	_, run := stage.Start(context.Background())
	run.Observe(termination.Event{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: 3}})
	run.Observe(termination.Event{Kind: termination.KindMessage, Usage: termination.Usage{OutputTokens: 4}})
	run.Observe(termination.Event{Kind: termination.KindMessage})
	res := run.Finish(nil)
	require.Equal(t, termination.TagMaxIterations, res.Tag())
	require.Len(t, sp.parts, 1)
	p := sp.parts[0]
	assert.Equal(t, []string{"start", "event:message", "event:message", "event:message",
		"stopped:max_iterations", "end:max_iterations", "ended"}, p.log(),
		"Start once the run is live, each evaluated event, Stopped when the cause is decided, End, then Ended")
	assert.Equal(t, int64(7), p.spent, "the Spender is given every evaluated event's usage")
	assert.True(t, p.endedOK, "Ended runs without the run's lock: it can read the run")
}

func TestParticipantStartRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		err      error
		wantTag  string
		wantText string
	}{
		"a cause ends the run with it":      {termination.Skipped{Reason: termination.SkipBlocked, Detail: "incident"}, termination.TagSkipped, "blocked"},
		"another error fails the run":       {errors.New("quota service down"), termination.TagFailed, "quota service down"},
		"a wrapped cause is found":          {wrapErr{termination.Skipped{Reason: termination.SkipBlocked}}, termination.TagSkipped, "blocked"},
		"a typed nil cause is no cause":     {(*termination.Custom)(nil), "", ""},
		"no error: the run goes on as ever": {nil, "", ""},
	} {
		t.Run(name, func(t *testing.T) {
			sp := &seamParticipant{part: func(run *middleware.Run) *seamPart { return &seamPart{run: run, startErr: tc.err} }}
			stage := mustStage(t, "seam", middleware.WithParticipant(sp), policy(t, "max_iterations: 5"))
			ctx, run := stage.Start(context.Background())
			if tc.wantTag == "" {
				assert.NoError(t, ctx.Err(), "the run is live")
				run.Observe(termination.Event{Kind: termination.KindFinal})
				assert.Equal(t, termination.TagNaturalCompletion, run.Finish(nil).Tag())
				return
			}
			assert.Error(t, ctx.Err(), "the run's context is cancelled at once")
			res := run.Finish(nil)
			assert.Equal(t, tc.wantTag, res.Tag())
			assert.Contains(t, res.Cause.Error(), tc.wantText)
			if c, ok := tc.err.(termination.Cause); ok {
				assert.Equal(t, c, res.Cause, "the Starter's cause, as it is")
			}
			assert.Equal(t, 0, res.Events)
		})
	}
}

type wrapErr struct{ c termination.Cause }

func (w wrapErr) Error() string { return "wrapped: " + w.c.Error() }
func (w wrapErr) Unwrap() error { return w.c }

func TestSpenderStopsAndWarns(t *testing.T) {
	exhausted := termination.BudgetExhausted{Resource: termination.ResourceTotalTokens, Used: 10, Limit: 10, Scope: termination.ScopeFleet}
	pressure := termination.BudgetPressure{Resource: termination.ResourceTotalTokens, Used: 8, Limit: 10, Threshold: 0.8, Scope: termination.ScopeFleet}
	var total int64
	sp := &seamParticipant{part: func(run *middleware.Run) *seamPart {
		return &seamPart{run: run, spend: func(u termination.Usage, _ float64) (termination.Cause, termination.Cause) {
			total += u.InputTokens
			switch {
			case total >= 10:
				return nil, exhausted
			case total >= 8:
				return pressure, nil
			}
			return nil, nil
		}}
	}}
	var hooked []termination.Cause
	stage := mustStage(t, "seam", middleware.WithParticipant(sp), policy(t, "max_iterations: 50"),
		middleware.WithOnWarning(func(_ context.Context, _ *middleware.Run, c termination.Cause) { hooked = append(hooked, c) }))
	_, run := stage.Start(context.Background())
	for i, want := range []bool{false, false, true} { // 4, 8 (pressure), 12 (exhausted)
		_, stop := run.Observe(termination.Event{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: 4}})
		require.Equal(t, want, stop, "event %d", i+1)
	}
	res := run.Finish(nil)
	assert.Equal(t, exhausted, res.Cause, "the Spender's stop is the run's cause")
	assert.Equal(t, 3, res.StoppedAt, "as if it had fired on the event that spent it")
	assert.Equal(t, []termination.Cause{pressure}, res.Warnings)
	assert.Equal(t, []termination.Cause{pressure}, hooked, "the warning reaches the hook at once")
	assert.Contains(t, sp.parts[0].log(), "warning:budget_pressure", "and the parts")
}

func TestParticipantsInOrder(t *testing.T) {
	var order []string
	var mu sync.Mutex
	mk := func(name string) *orderParticipant {
		return &orderParticipant{name: name, note: func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }}
	}
	shadow := termination.MustParsePolicy("max_iterations: 1")
	stage := mustStage(t, "seam", middleware.WithParticipant(mk("first")), middleware.WithParticipant(mk("second")),
		middleware.WithShadowPolicy("strict", shadow), policy(t, "max_iterations: 5"))
	_, run := stage.Start(context.Background())
	run.Observe(termination.Event{Kind: termination.KindMessage})
	run.Observe(termination.Event{Kind: termination.KindMessage})
	run.Finish(nil)
	assert.Equal(t, []string{"join:first", "join:second", "end:first:shadowed", "end:second:shadowed"}, order,
		"participants join and end in the order given; the stage's shadow policies' part comes before them and fills Result.Shadow")
}

type orderParticipant struct {
	name string
	note func(string)
}

func (o *orderParticipant) Join(ctx context.Context, _ *middleware.Run) (context.Context, middleware.Part) {
	o.note("join:" + o.name)
	return ctx, orderPart{o}
}

type orderPart struct{ o *orderParticipant }

func (orderPart) Event(*termination.Event)  {}
func (orderPart) Warning(termination.Cause) {}
func (orderPart) Error(error)               {}
func (p orderPart) End(res *termination.Result) {
	s := "end:" + p.o.name
	if v := res.Shadow["strict"]; v != nil && v.Cause != nil {
		s += ":shadowed"
	}
	p.o.note(s)
}

func TestRunInfoForParticipants(t *testing.T) {
	var got middleware.RunInfo
	stage := mustStage(t, "seam", middleware.WithParticipant(joinFunc(func(ctx context.Context, run *middleware.Run) (context.Context, middleware.Part) {
		got = run.Info()
		return ctx, nil // a participant may sit a run out
	})), middleware.WithProviderName("openai"), policy(t, "max_iterations: 5"))
	pctx, parent := stage.Start(context.Background(), middleware.WithAgentID("a1"))
	_, child := stage.Start(pctx, middleware.WithConversationID("c1"))
	assert.Equal(t, middleware.RunInfo{Stage: "seam", Provider: "openai", ConversationID: "c1", RunID: child.ID(),
		ParentRunID: parent.ID(), Policy: got.Policy}, got)
	assert.True(t, runid.Valid(got.RunID))
	child.Finish(nil)
	parent.Finish(nil)
}

type joinFunc func(ctx context.Context, run *middleware.Run) (context.Context, middleware.Part)

func (f joinFunc) Join(ctx context.Context, run *middleware.Run) (context.Context, middleware.Part) {
	return f(ctx, run)
}
