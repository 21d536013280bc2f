package middleware_test

import (
	"context"
	"flag"
	"iter"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// forwarding runs the items through one of the forwarding paths and
// returns what came out and the run's result.
type forwarding func(t *testing.T, stage *middleware.Stage, items []item) ([]item, termination.Result)

var forwardings = map[string]forwarding{
	"Forward": viaChan(func(run *middleware.Run, in <-chan item) <-chan item {
		return middleware.Forward(run, in, decodeItem)
	}),
	"ForwardEach": viaChan(func(run *middleware.Run, in <-chan item) <-chan item {
		return middleware.ForwardEach(run, in, decodeItemEach)
	}),
	"Range": viaRange(func(run *middleware.Run, in <-chan item) iter.Seq[item] {
		return middleware.Range(run, in, decodeItem)
	}),
	"RangeEach": viaRange(func(run *middleware.Run, in <-chan item) iter.Seq[item] {
		return middleware.RangeEach(run, in, decodeItemEach)
	}),
	"ForwardSeq": viaSeq(func(run *middleware.Run, seq iter.Seq2[item, error]) iter.Seq2[item, error] {
		return middleware.ForwardSeq(run, seq, decodeItem)
	}),
	"ForwardSeqEach": viaSeq(func(run *middleware.Run, seq iter.Seq2[item, error]) iter.Seq2[item, error] {
		return middleware.ForwardSeqEach(run, seq, decodeItemEach)
	}),
}

// viaChan is the forwarding through a form that takes and returns a
// channel: it starts a run, feeds the items from a producer honouring the
// run's context, and drains the output.
func viaChan(form func(*middleware.Run, <-chan item) <-chan item) forwarding {
	return func(t *testing.T, stage *middleware.Stage, items []item) ([]item, termination.Result) {
		ctx, run := stage.Start(context.Background())
		var out []item
		for it := range form(run, produce(ctx, items)) {
			out = append(out, it)
		}
		return out, run.Wait()
	}
}

// viaRange is viaChan for a form that returns an iterator.
func viaRange(form func(*middleware.Run, <-chan item) iter.Seq[item]) forwarding {
	return func(t *testing.T, stage *middleware.Stage, items []item) ([]item, termination.Result) {
		ctx, run := stage.Start(context.Background())
		var out []item
		for it := range form(run, produce(ctx, items)) {
			out = append(out, it)
		}
		return out, run.Wait()
	}
}

// viaSeq is the forwarding through a form over an iter.Seq2 of the items;
// every pair that comes out must carry a nil error.
func viaSeq(form func(*middleware.Run, iter.Seq2[item, error]) iter.Seq2[item, error]) forwarding {
	return func(t *testing.T, stage *middleware.Stage, items []item) ([]item, termination.Result) {
		_, run := stage.Start(context.Background())
		var out []item
		for it, err := range form(run, seqOf(items)) {
			require.NoError(t, err)
			out = append(out, it)
		}
		return out, run.Wait()
	}
}

// group splits events into items of 1 to 3 events for the Each forms, or
// one event each.
func group(r *rand.Rand, evs []termination.Event, each bool) []item {
	if !each {
		return itemsOf(evs)
	}
	var items []item
	for i := 0; i < len(evs); {
		n := min(1+r.IntN(3), len(evs)-i)
		items = append(items, item{i: len(items), evs: evs[i : i+n]})
		i += n
	}
	return items
}

// expected is what must come out of a forwarding of items under cond: the
// items up to and including the one holding the firing event (all of them
// when nothing fires), and the replay evaluator's result over the events
// of those items up to the firing one.
func expected(cond termination.Condition, items []item) ([]int, termination.Result) {
	var evs []termination.Event
	for _, it := range items {
		evs = append(evs, it.evs...)
	}
	want := replay(cond, evs)
	if want.StoppedAt == 0 {
		return indices(items), want
	}
	n := 0
	for k, it := range items {
		n += len(it.evs)
		if n >= want.StoppedAt {
			return indices(items[:k+1]), want
		}
	}
	panic("unreachable")
}

var propSeed = flag.Uint64("prop.seed", 1, "seed of the random streams and policies of the property tests; 0: a new one per run")

func seed(t *testing.T) uint64 {
	s := *propSeed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -prop.seed=%d)", s, s)
	return s
}

func TestForwardingProperty(t *testing.T) {
	const cases = 300
	seed := seed(t)
	t.Logf("seed %d", seed)
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range forwardings {
			if !yield(k) {
				return
			}
		}
	}) {
		fwd := forwardings[name]
		each := name == "ForwardEach" || name == "ForwardSeqEach" || name == "RangeEach"
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 1))
			fired := 0
			for c := range cases {
				src := randomPolicy(r, 0)
				p, err := termination.ParsePolicy([]byte(src))
				require.NoError(t, err, "policy %s", src)
				stage := mustStage(t, "prop", middleware.WithPolicy(p), middleware.WithDrainTimeout(time.Second))
				items := group(r, loopy(r, randomEvents(r, r.IntN(40))), each)

				wantIdx, want := expected(p.Condition(), items)
				out, got := fwd(t, stage, items)
				if want.StoppedAt > 0 {
					fired++
				}
				if !assert.Equal(t, wantIdx, indices(out), "case %d: policy %s: forwarded items", c, src) ||
					!assert.Empty(t, sameCounts(got, want), "case %d: policy %s", c, src) {
					t.Logf("events: %+v", items)
					return
				}
				assert.Equal(t, "prop", got.Stage)
				assert.Equal(t, got.Cause.TagValue(), got.Tag())
			}
			t.Logf("%d of %d runs stopped on an event", fired, cases)
			assert.Greater(t, fired, cases/4, "the generator should make conditions fire often")
			assert.Less(t, fired, cases, "the generator should leave some streams to end by themselves")
		})
	}
}

// TestObserveMatchesReplay: the synchronous path agrees with replay too.
func TestObserveMatchesReplay(t *testing.T) {
	r := rand.New(rand.NewPCG(seed(t), 2))
	for c := range 300 {
		src := randomPolicy(r, 0)
		p := termination.MustParsePolicy(src)
		stage := mustStage(t, "observe", middleware.WithPolicy(p))
		evs := loopy(r, randomEvents(r, r.IntN(40)))
		want := replay(p.Condition(), evs)
		_, run := stage.Start(context.Background())
		for i, ev := range evs {
			cause, stop := run.Observe(ev)
			if stop {
				require.Equal(t, want.StoppedAt, i+1, "case %d: policy %s", c, src)
				require.Equal(t, want.Cause, cause)
				break
			}
		}
		got := run.Finish(nil)
		require.Empty(t, sameCounts(got, want), "case %d: policy %s", c, src)
	}
}

// TestPropertyGeneratorCoverage: the random policies and streams of the
// property tests reach the newer conditions often, so that live and replay
// are compared on them.
func TestPropertyGeneratorCoverage(t *testing.T) {
	r := rand.New(rand.NewPCG(seed(t), 3))
	covered := map[string]int{}
	for range 1000 {
		p := termination.MustParsePolicy(randomPolicy(r, 0))
		noteCovered(covered, replay(p.Condition(), loopy(r, randomEvents(r, r.IntN(40)))))
	}
	t.Logf("%v", covered)
	for _, k := range []string{"per-tool limit", "cycle", "iteration pressure", "tool-call pressure", "stall warning",
		"repeated_result", "evidence of several events"} {
		assert.GreaterOrEqual(t, covered[k], 5, "random runs that reached a %s: widen the generator", k)
	}
	// Finals are rare in the random streams (the loop ends after one).
	assert.GreaterOrEqual(t, covered["limit a final reached"], 2, "random runs that stopped on a limit a final reached: widen the generator")
}

// noteCovered records which of the newer conditions fired or warned in res.
func noteCovered(covered map[string]int, res termination.Result) {
	for _, c := range append(slices.Clone(res.Fired), res.Warnings...) {
		switch c := c.(type) {
		case termination.MaxToolCallsReached:
			if c.Tool != "" {
				covered["per-tool limit"]++
			}
		case termination.StallDetected:
			switch c.Signal {
			case termination.SignalCycle:
				covered["cycle"]++
			case termination.SignalRepeatedResult:
				covered["repeated_result"]++
			}
		}
	}
	if len(res.Evidence) > 1 {
		covered["evidence of several events"]++
		switch res.Cause.(type) {
		case termination.MaxIterationsReached, termination.BudgetExhausted:
			// [the final that reached the limit, the event that fired]
			covered["limit a final reached"]++
		}
	}
	for _, w := range res.Warnings {
		switch w := w.(type) {
		case termination.BudgetPressure:
			switch w.Resource {
			case termination.ResourceIterations:
				covered["iteration pressure"]++
			case termination.ResourceToolCalls:
				covered["tool-call pressure"]++
			}
		case termination.StallDetected:
			covered["stall warning"]++
		}
	}
}

// loopy makes one stream in two call its tools in a loop (A, B, A, B, or
// A, B, C, ...), mostly, with more tool calls, so that stall cycles and
// windows get to fire.
func loopy(r *rand.Rand, evs []termination.Event) []termination.Event {
	if r.IntN(2) > 0 {
		return evs
	}
	period := 2 + r.IntN(2)
	n := 0
	for i := range evs {
		if (evs[i].Kind == termination.KindToolCall || r.IntN(3) == 0) && r.IntN(10) > 0 {
			evs[i] = termination.Event{Kind: termination.KindToolCall, Source: evs[i].Source, Usage: evs[i].Usage,
				Tool: tools[n%period], Args: []byte(argsSet[n%period])}
			if i+1 < len(evs) && r.IntN(2) == 0 {
				// Its result, often the same one: stall.same_result's repeats.
				evs[i+1] = termination.Event{Kind: termination.KindToolResult, Source: evs[i].Tool, Tool: evs[i].Tool,
					Text: pick(r, outputs[:2])}
			}
			n++
		}
	}
	return evs
}
