package middleware_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/testutil"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/telemetry"
	"github.com/agentstop/agentstop/termination"
)

// benchPolicy has every kind of condition; its limits are out of reach of
// the benchmark streams, so every event is evaluated by every condition
// and nothing fires.
const benchPolicy = `
max_iterations: {limit: 1000000000, pressure: 0.8}
max_tool_calls: {limit: 1000000000, pressure: 0.8, per_tool: {search: 1000000000, calculator: 1000000000}}
token_budget: {total: 1000000000000, pressure: 0.8, grace: 2}
cost_budget: {limit: 1000000000, pressure: 0.9}
stall: {repeats: 3, window: 8, warn_at: 2, cycle: 3, token_tolerance: 0.1}
errors: {consecutive: 3, total: 1000000000}
text_mention: {text: TERMINATE}
function_call: [approve]
handoff: [user]
stop_message: true
`

// benchEvents is a realistic loop's mix: model turns with usage, tool calls
// with JSON args and their results (one failing now and then), varied so
// that no stall fires: the 16 calls of a round all differ, so no call
// repeats within a window of 8 and no block of 2 to 4 calls repeats.
func benchEvents() []termination.Event {
	args := []string{
		`{"query":"capital of France","limit":5,"page":%d}`,
		`{"query":"population of Paris","limit":5,"lang":"en","page":%d}`,
		`{"path":"/tmp/report.md","content":"# Findings\n...","part":%d}`,
		`{"expression":"(3 + 4) * %d"}`,
	}
	texts := []string{"Let me search for that.", "I found part of it.", "Writing it down.", "Checking the numbers."}
	tools := []string{"search", "search", "write_file", "calculator"}
	var evs []termination.Event
	for i := range 16 {
		k := i % 4
		evs = append(evs,
			termination.Event{Kind: termination.KindMessage, Source: "assistant", Text: texts[k],
				Usage: termination.Usage{InputTokens: int64(800 + 400*(i%2)), OutputTokens: 40}, Cost: 0.002},
			termination.Event{Kind: termination.KindToolCall, Source: "assistant", Tool: tools[k], Args: fmt.Appendf(nil, args[k], i)},
		)
		res := termination.Event{Kind: termination.KindToolResult, Source: "tools", Tool: tools[k], Text: "ok"}
		if i%7 == 6 {
			res.Err = "timeout"
		}
		evs = append(evs, res)
	}
	return evs
}

func benchStageOptions(b *testing.B) middleware.Option {
	b.Helper()
	p, err := termination.ParsePolicy([]byte(benchPolicy))
	if err != nil {
		b.Fatal(err)
	}
	return middleware.WithPolicy(p)
}

func identity(ev termination.Event) termination.Event { return ev }

// instrumented records through package telemetry on the real SDK: metrics
// to a manual reader, spans sampled by sampler (and dropped at their end:
// no exporter, so the benchmark measures recording, not export).
func instrumented(b *testing.B, sampler sdktrace.Sampler) middleware.Option {
	b.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler))
	b.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	return middleware.WithParticipant(telemetry.NewRecorder(telemetry.WithMeterProvider(mp), telemetry.WithTracerProvider(tp)))
}

// BenchmarkForward: ns/op and allocs/op are per event; b.N events go
// through one run. raw is the floor: a plain goroutine forwarding a
// channel. A case is one row: its stage options (raw: none, no stage).
func BenchmarkForward(b *testing.B) {
	full := benchStageOptions(b)
	cases := []struct {
		name string
		raw  bool
		opts []middleware.Option
	}{
		{name: "raw", raw: true},
		{name: "wrapped", opts: []middleware.Option{full}},
		{name: "instrumented", opts: []middleware.Option{full, instrumented(b, sdktrace.AlwaysSample())}},
		{name: "instrumented_unsampled", opts: []middleware.Option{full, instrumented(b, sdktrace.NeverSample())}},
	}
	evs := benchEvents()
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			// The producer honours its context in every case, as a loop
			// does: a cancellable one for the bare goroutine (a select on
			// a nil Done channel, context.Background's, would make the
			// floor's producer cheaper than the others'), the run's
			// context for the wrapped ones.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var (
				run   *middleware.Run
				stage *middleware.Stage
			)
			if !c.raw {
				var err error
				if stage, err = middleware.New("bench", c.opts...); err != nil {
					b.Fatal(err)
				}
				ctx, run = stage.Start(ctx)
			}
			in := testutil.Produce(ctx, b.N, evs)
			var out <-chan termination.Event
			if c.raw {
				raw := make(chan termination.Event)
				go func() {
					defer close(raw)
					for ev := range in {
						raw <- ev
					}
				}()
				out = raw
			} else {
				out = middleware.Forward(run, in, identity)
			}
			b.ResetTimer()
			n := 0
			for range out {
				n++
			}
			b.StopTimer()
			if n != b.N {
				b.Fatalf("forwarded %d of %d events", n, b.N)
			}
			if run != nil {
				if res := run.Wait(); res.Tag() != termination.TagNaturalCompletion {
					b.Fatalf("the benchmark stream fired %v", res.Cause)
				}
			}
		})
	}
}

// BenchmarkRange: ns/op and allocs/op are per event; b.N events go
// through one run, from the same producer as BenchmarkForward's (it
// honours its context). raw is the floor: a bare `for ev := range in`;
// guarded ranges over middleware.Range with the full policy and no SDK.
// Contract §6: guarded adds at most twice Observe's per-event cost
// (BenchmarkObserve/bare) to raw, with 0 allocs.
func BenchmarkRange(b *testing.B) {
	full := benchStageOptions(b)
	evs := benchEvents()
	for _, guarded := range []bool{false, true} {
		name := "raw"
		if guarded {
			name = "guarded"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var run *middleware.Run
			if guarded {
				stage, err := middleware.New("bench", full)
				if err != nil {
					b.Fatal(err)
				}
				ctx, run = stage.Start(ctx)
			}
			in := testutil.Produce(ctx, b.N, evs)
			b.ResetTimer()
			// Both bodies take the item and read it, as a loop does.
			n, tools := 0, 0
			if guarded {
				for ev := range middleware.Range(run, in, identity) {
					n++
					if ev.Kind == termination.KindToolCall {
						tools++
					}
				}
			} else {
				for ev := range in {
					n++
					if ev.Kind == termination.KindToolCall {
						tools++
					}
				}
			}
			b.StopTimer()
			if n != b.N || tools == 0 && n >= len(evs) {
				b.Fatalf("received %d of %d events, %d tool calls", n, b.N, tools)
			}
			if run != nil {
				if res := run.Wait(); res.Tag() != termination.TagNaturalCompletion {
					b.Fatalf("the benchmark stream fired %v", res.Cause)
				}
			}
		})
	}
}

// BenchmarkObserve: the synchronous path, one event per op, full policy:
// bare (no recorder), then the real OpenTelemetry SDK recording with every
// span sampled (each tool call becomes an execute_tool span) and with
// spans not sampled (metrics only, as for the runs a head sampler skips).
// bare_clocked adds a timeout and an idle limit out of reach: what reading
// the clock once per event costs (the run's timer is not touched per
// event). shadow adds one shadow policy (§5.2) that is the full policy
// too (it holds no timeout or idle): what evaluating a candidate beside
// the enforced policy costs per event.
func BenchmarkObserve(b *testing.B) {
	clocked := termination.MustParsePolicy(`{timeout: 1000h, idle: 1000h}`)
	candidate := termination.MustParsePolicy(benchPolicy)
	cases := []struct {
		name string
		opts []middleware.Option
	}{
		{"bare", nil},
		{"bare_clocked", []middleware.Option{middleware.WithPolicy(clocked)}},
		{"shadow", []middleware.Option{middleware.WithShadowPolicy("candidate", candidate)}},
		{"sdk_sampled", []middleware.Option{instrumented(b, sdktrace.AlwaysSample())}},
		{"sdk_unsampled", []middleware.Option{instrumented(b, sdktrace.NeverSample())}},
	}
	evs := benchEvents()
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			stage, err := middleware.New("bench", append([]middleware.Option{benchStageOptions(b)}, c.opts...)...)
			if err != nil {
				b.Fatal(err)
			}
			_, run := stage.Start(context.Background())
			b.ResetTimer()
			for i := range b.N {
				if _, stop := run.Observe(evs[i%len(evs)]); stop {
					b.Fatalf("fired at event %d", i)
				}
			}
			b.StopTimer()
			run.Finish(nil)
		})
	}
}

// BenchmarkConcurrentRuns: many runs on one stage at once. An op is one
// whole run of 12 events through Forward, from parallel goroutines. The
// B/live-run metric is the heap and stack held by one run that is live
// (started, forwarding goroutine waiting for its next event, some events
// evaluated), measured over 1,000 live runs, with its heap and stack parts.
func BenchmarkConcurrentRuns(b *testing.B) {
	full := benchStageOptions(b)
	stage, err := middleware.New("bench", full)
	if err != nil {
		b.Fatal(err)
	}
	evs := benchEvents()[:12]
	heap, stack := bytesPerLiveRun(b, stage, evs, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ctx, run := stage.Start(context.Background())
			in := make(chan termination.Event)
			go func() {
				defer close(in)
				for _, ev := range evs {
					select {
					case in <- ev:
					case <-ctx.Done():
						return
					}
				}
			}()
			for range middleware.Forward(run, in, identity) {
			}
			if res := run.Wait(); res.Events != len(evs) {
				panic(fmt.Sprintf("run evaluated %d events: %v", res.Events, res.Cause))
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(heap+stack, "B/live-run")
	b.ReportMetric(heap, "heap-B/live-run")
	b.ReportMetric(stack, "stack-B/live-run")
}

// bytesPerLiveRun returns the heap and the goroutine stack held by one live
// run, averaged over n, in the steady state of a process that runs many:
// n runs are started first, then n more are measured. The runtime starts
// new goroutines with the average stack size that its last collection
// found (GODEBUG adaptivestackstart); in a process running many runs that
// average is the runs', while in a benchmark that has just started it is
// that of the testing package's few deep goroutines, which would hand
// every run a 4 KiB stack whatever the run needs.
//
// It is measured once per process, the first time: a goroutine (its g,
// about 0.5 KiB) and the sudogs of a parked select are runtime objects
// that are reused once freed, so that after runs have ended, new runs
// take their memory without a new allocation and a heap difference would
// no longer see it, although each live run still holds it. The first
// time, the warm runs take what earlier benchmarks left behind.
func bytesPerLiveRun(b *testing.B, stage *middleware.Stage, evs []termination.Event, n int) (heap, stack float64) {
	b.Helper()
	liveRunOnce.Do(func() { liveHeap, liveStack = measureLiveRuns(stage, evs, n) })
	return liveHeap, liveStack
}

var (
	liveRunOnce         sync.Once
	liveHeap, liveStack float64
)

func measureLiveRuns(stage *middleware.Stage, evs []termination.Event, n int) (heap, stack float64) {
	warm := startLiveRuns(stage, evs, newLiveRuns(n))
	defer endLiveRuns(warm)
	lives := newLiveRuns(n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC() // the starting stack size is computed from the previous cycle's scan
	runtime.ReadMemStats(&before)
	startLiveRuns(stage, evs, lives)
	runtime.GC()
	runtime.ReadMemStats(&after)
	endLiveRuns(lives)
	heap = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(n)
	stack = (float64(after.StackInuse) - float64(before.StackInuse)) / float64(n)
	return heap, stack
}

// liveRun is a run whose forwarder waits for its next event.
type liveRun struct {
	run *middleware.Run
	in  chan termination.Event
	out <-chan termination.Event
}

// newLiveRuns makes n slots for live runs, each with its producer's
// channel. The channel (and the benchmark's slot) belong to the loop, not
// to its run: a loop has them with or without agentstop, as the bare
// goroutine of BenchmarkForward does, so they are made before a
// measurement, and a live run's figure is what Start and Forward add.
func newLiveRuns(n int) []liveRun {
	lives := make([]liveRun, n)
	for i := range lives {
		lives[i].in = make(chan termination.Event)
	}
	return lives
}

// startLiveRuns starts a run in each of lives and has it forward evs from
// the slot's channel. It returns lives.
func startLiveRuns(stage *middleware.Stage, evs []termination.Event, lives []liveRun) []liveRun {
	for i := range lives {
		l := &lives[i]
		_, l.run = stage.Start(context.Background())
		l.out = middleware.Forward(l.run, l.in, identity)
		for _, ev := range evs {
			l.in <- ev
			<-l.out
		}
	}
	return lives
}

// endLiveRuns ends the runs' streams and waits for them.
func endLiveRuns(lives []liveRun) {
	var wg sync.WaitGroup
	for _, l := range lives {
		close(l.in)
		wg.Go(func() {
			for range l.out {
			}
			l.run.Wait()
		})
	}
	wg.Wait()
}

// benchTreeLimits are the tree limits of BenchmarkTree's holder: token and
// cost budgets (with pressure) and tool calls, out of reach of the stream.
const benchTreeLimits = `tree: {max_tool_calls: {limit: 1000000000, pressure: 0.8}, token_budget: {total: 1000000000000, pressure: 0.8}, cost_budget: {limit: 1000000000, pressure: 0.9}}`

// BenchmarkTree (§6): Observe of a run three levels below the holder of
// tree: limits, whose every event is also evaluated by the holder's tree
// limits, against Observe of the same run (full policy) alone. One event
// per op.
func BenchmarkTree(b *testing.B) {
	evs := benchEvents()
	leaf, err := middleware.New("leaf", benchStageOptions(b))
	if err != nil {
		b.Fatal(err)
	}
	holderPolicy, err := termination.ParsePolicy(benchTreeLimits)
	if err != nil {
		b.Fatal(err)
	}
	holder, err := middleware.New("holder", middleware.WithPolicy(holderPolicy))
	if err != nil {
		b.Fatal(err)
	}
	middle, err := middleware.New("middle")
	if err != nil {
		b.Fatal(err)
	}
	// The same holder in a stage with a fleet that shares trees: its tree
	// is shared from its start (§8), so every event of the subtree is also
	// spent through the fleet.
	fleetHolder, err := middleware.New("holder", middleware.WithPolicy(holderPolicy), middleware.WithParticipant(fleet.Membership(fleet.NewLocal())))
	if err != nil {
		b.Fatal(err)
	}
	for _, depth := range []struct {
		name   string
		d      int
		holder *middleware.Stage
	}{{"alone", 0, nil}, {"depth3", 3, holder}, {"depth3_fleet", 3, fleetHolder}} {
		b.Run(depth.name, func(b *testing.B) {
			b.ReportAllocs()
			var ancestors []*middleware.Run
			ctx := context.Background()
			if depth.d > 0 {
				var r *middleware.Run
				ctx, r = depth.holder.Start(ctx)
				ancestors = append(ancestors, r)
				for range depth.d - 1 {
					ctx, r = middle.Start(ctx)
					ancestors = append(ancestors, r)
				}
			}
			_, run := leaf.Start(ctx)
			b.ResetTimer()
			for i := range b.N {
				if _, stop := run.Observe(evs[i%len(evs)]); stop {
					b.Fatalf("fired at event %d: %v", i, run.Finish(nil).Cause)
				}
			}
			b.StopTimer()
			run.Finish(nil)
			for i := len(ancestors) - 1; i >= 0; i-- {
				ancestors[i].Finish(nil)
			}
		})
	}
}
