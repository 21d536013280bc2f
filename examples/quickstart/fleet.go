package main

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// stageSpec is one simulated agent stage: its policy and the scripted
// behaviours its runs take turns at.
type stageSpec struct {
	name       string
	policy     string
	wrap       string // how the loop is wrapped: channel, seq or callback
	behaviours []behaviour
}

// behaviour scripts one run. next returns the i-th event and false once the
// script is over; runaway scripts never end by themselves.
type behaviour struct {
	name string
	next func(i int) (termination.Event, bool)
	// hang makes the loop stop sending (but honour its context) after the
	// script's events: a hung loop that only the timeout timer can end.
	hang bool
	// stopAfter makes an operator press Stop after this long.
	stopAfter time.Duration
	// cancelAfter cancels the caller's context after this long.
	cancelAfter time.Duration
	// skip skips the stage instead of running it.
	skip string
}

var stages = []stageSpec{
	{
		name: "planner", wrap: "seq",
		policy: "handoff: [coder]\nmax_iterations: 8\n",
		behaviours: []behaviour{
			{name: "plans and finishes", next: script(
				msg("planner", "Breaking the task into steps.", 300, 60),
				final("planner", "Plan: research, implement, review.", 420, 80))},
			{name: "hands off to the coder", next: script(
				msg("planner", "This needs code.", 280, 40),
				termination.Event{Kind: termination.KindHandoff, Source: "planner", Target: "coder"})},
		},
	},
	{
		name: "researcher", wrap: "channel",
		policy: "max_tool_calls: 5\nstall: {repeats: 3}\n",
		behaviours: []behaviour{
			{name: "searches with new queries forever", next: func(i int) (termination.Event, bool) {
				if i%2 == 0 {
					return msg("researcher", fmt.Sprintf("Not found yet, refining (%d).", i/2), 400+int64(i)*30, 30), true
				}
				return call("web_search", fmt.Sprintf(`{"query":"agent loop termination %d"}`, i)), true
			}},
			{name: "repeats the same search", next: func(i int) (termination.Event, bool) {
				if i%2 == 0 {
					return msg("researcher", fmt.Sprintf("Trying again (%d).", i/2), 350, 25), true
				}
				return call("web_search", `{"query": "agentstop", "limit": 5}`), true
			}},
			{name: "researches and answers", next: script(
				msg("researcher", "Looking it up.", 300, 20),
				call("web_search", `{"query":"OpenTelemetry exemplars"}`),
				result("web_search", ""),
				final("researcher", "Exemplars link metrics to traces.", 520, 70))},
		},
	},
	{
		name: "coder", wrap: "channel",
		policy: "max_iterations: 6\nerrors: {consecutive: 3}\n",
		behaviours: []behaviour{
			{name: "keeps rethinking", next: func(i int) (termination.Event, bool) {
				return msg("coder", fmt.Sprintf("Refactoring attempt %d.", i), 600, 120), true
			}},
			{name: "tool keeps failing", next: func(i int) (termination.Event, bool) {
				if i%2 == 0 {
					return call("run_tests", fmt.Sprintf(`{"attempt":%d}`, i)), true
				}
				return result("run_tests", "exit status 1: 3 tests failed"), true
			}},
			{name: "crashes", next: script(
				msg("coder", "Compiling.", 200, 30),
				termination.Event{Kind: termination.KindError, Source: "coder", Err: "model provider: 503 service unavailable"})},
			{name: "calls a dangerous tool", next: script(
				msg("coder", "Cleaning up the test data.", 250, 40),
				call("drop_database", `{"name":"production"}`))},
		},
	},
	{
		name: "critic", wrap: "callback",
		policy: "text_mention: {text: APPROVE, sources: [critic]}\ntimeout: 2s\n",
		behaviours: []behaviour{
			{name: "approves", next: script(
				msg("coder", "Here is the patch.", 0, 0),
				msg("critic", "Tests pass. APPROVE", 380, 12))},
			{name: "hangs waiting on the model", hang: true, next: script(
				msg("critic", "Reviewing...", 300, 10))},
		},
	},
	{
		name: "summarizer", wrap: "seq",
		policy: "token_budget: {total: 5000, pressure: 0.7, grace: 1}\n",
		behaviours: []behaviour{
			{name: "burns the budget", next: func(i int) (termination.Event, bool) {
				return msg("summarizer", fmt.Sprintf("Summary of part %d ...", i), 1800, 200), true
			}},
			{name: "wraps up under pressure", next: func(i int) (termination.Event, bool) {
				return msg("summarizer", fmt.Sprintf("Short summary %d.", i), 700, 100), true
			}},
		},
	},
	{
		name: "executor", wrap: "callback",
		policy: "stop_message: true\nmax_tool_calls: 20\n",
		behaviours: []behaviour{
			{name: "deploys and stops", next: script(
				call("deploy", `{"env":"staging"}`),
				result("deploy", ""),
				termination.Event{Kind: termination.KindStop, Source: "executor", Text: "deployed"})},
			{name: "operator presses Stop", stopAfter: 400 * time.Millisecond, next: func(i int) (termination.Event, bool) {
				return msg("executor", fmt.Sprintf("Waiting for rollout (%d).", i), 100, 5), true
			}},
			{name: "caller gives up", cancelAfter: 400 * time.Millisecond, next: func(i int) (termination.Event, bool) {
				return msg("executor", fmt.Sprintf("Polling status (%d).", i), 100, 5), true
			}},
			{name: "nothing to deploy", skip: "no changes to deploy"},
		},
	},
}

// dangerousTools is the custom guard: calling one stops the run with a
// Custom cause (recorded as termination_cause="custom").
var dangerousTools = termination.Func("dangerous_tool", func(ev termination.Event, _ termination.Progress) termination.Cause {
	if ev.Kind == termination.KindToolCall && ev.Tool == "drop_database" {
		return termination.Custom{Reason: "dangerous_tool", Properties: map[string]any{"tool": ev.Tool}}
	}
	return nil
})

func script(events ...termination.Event) func(int) (termination.Event, bool) {
	return func(i int) (termination.Event, bool) {
		if i < len(events) {
			return events[i], true
		}
		return termination.Event{}, false
	}
}

func msg(source, text string, in, out int64) termination.Event {
	return termination.Event{Kind: termination.KindMessage, Source: source, Text: text,
		Usage: termination.Usage{InputTokens: in, OutputTokens: out}, Cost: float64(in+4*out) / 1e6}
}

func final(source, text string, in, out int64) termination.Event {
	ev := msg(source, text, in, out)
	ev.Kind = termination.KindFinal
	return ev
}

func call(tool, args string) termination.Event {
	return termination.Event{Kind: termination.KindToolCall, Source: "assistant", Tool: tool, Args: []byte(args)}
}

func result(tool, err string) termination.Event {
	return termination.Event{Kind: termination.KindToolResult, Source: tool, Tool: tool, Text: "ok", Err: err}
}

// fleet runs every stage with two workers each.
type fleet struct {
	stages []*middleware.Stage
	tally  *tally
	wg     sync.WaitGroup
}

func newFleet(rec middleware.Recorder) (*fleet, error) {
	f := &fleet{tally: newTally()}
	for _, spec := range stages {
		policy, err := termination.ParsePolicy([]byte(spec.policy))
		if err != nil {
			return nil, fmt.Errorf("stage %s: %w", spec.name, err)
		}
		st, err := middleware.New(spec.name, append([]middleware.Option{middleware.WithPolicy(policy), middleware.WithCondition(dangerousTools),
			middleware.WithRecorder(rec), middleware.WithDrainTimeout(time.Second)}, fleetOptions...)...)
		if err != nil {
			return nil, err
		}
		f.stages = append(f.stages, st)
	}
	return f, nil
}

func (f *fleet) run(ctx context.Context) {
	for i, spec := range stages {
		for w := range 2 {
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				rng := rand.New(rand.NewPCG(uint64(i), uint64(w)))
				for n := w; ctx.Err() == nil; n++ {
					b := spec.behaviours[n%len(spec.behaviours)]
					res := runOnce(ctx, f.stages[i], spec.wrap, b, rng)
					f.tally.add(res)
					sleep(ctx, time.Duration(100+rng.IntN(300))*time.Millisecond)
				}
			}()
		}
	}
}

func (f *fleet) wait() { f.wg.Wait() }

// runOnce runs one scripted loop under the stage, wrapped the stage's way.
func runOnce(parent context.Context, st *middleware.Stage, wrap string, b behaviour, rng *rand.Rand) termination.Result {
	if b.skip != "" {
		return st.Skip(parent, b.skip)
	}
	caller, cancel := context.WithCancel(parent)
	defer cancel()
	if b.cancelAfter > 0 {
		t := time.AfterFunc(b.cancelAfter, cancel)
		defer t.Stop()
	}
	ctx, run := st.Start(caller, tenantLabel(rng))
	if b.stopAfter > 0 {
		t := time.AfterFunc(b.stopAfter, func() { run.Stop("operator pressed Stop") })
		defer t.Stop()
	}
	delay := func() time.Duration { return time.Duration(40+rng.IntN(80)) * time.Millisecond }
	switch wrap {
	case "channel":
		for range middleware.Forward(run, produce(ctx, b, delay), identity) {
		}
		return run.Wait()
	case "seq":
		for range middleware.ForwardSeq(run, sequence(ctx, b, delay), identity) {
		}
		return run.Wait()
	default: // callback: the loop reports each event to Observe
		for ev := range sequence(ctx, b, delay) {
			if _, stop := run.Observe(ev); stop {
				break
			}
		}
		return run.Finish(nil)
	}
}

func identity(ev termination.Event) termination.Event { return ev }

// sequence is the scripted loop as an iterator; it honours ctx.
func sequence(ctx context.Context, b behaviour, delay func() time.Duration) iter.Seq2[termination.Event, error] {
	return func(yield func(termination.Event, error) bool) {
		for i := 0; ; i++ {
			ev, ok := b.next(i)
			if !ok {
				break
			}
			if !sleep(ctx, delay()) {
				return
			}
			ev.Time = time.Now()
			if !yield(ev, nil) {
				return
			}
		}
		if b.hang {
			<-ctx.Done()
		}
	}
}

// produce is the scripted loop as a goroutine sending on a channel; it
// honours ctx and closes the channel when done.
func produce(ctx context.Context, b behaviour, delay func() time.Duration) <-chan termination.Event {
	out := make(chan termination.Event)
	go func() {
		defer close(out)
		for ev, err := range sequence(ctx, b, delay) {
			if err != nil {
				return
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
