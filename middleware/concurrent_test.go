package middleware_test

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// TestConcurrentRuns: 1,000 runs on one Stage at once, each with its own
// scripted stream, through Forward, ForwardEach, ForwardSeq and Observe,
// give independent results that each match replaying their own events.
func TestConcurrentRuns(t *testing.T) {
	const runs = 1000
	src := "{max_iterations: 8, max_tool_calls: 6, token_budget: {total: 1500, pressure: 0.8, grace: 1}, " +
		"cost_budget: {limit: 0.3}, stall: {repeats: 3, token_tolerance: 0.05}, errors: {consecutive: 2}, " +
		"text_mention: {text: TERMINATE}, function_call: [approve], handoff: [user], stop_message: true}"
	p := termination.MustParsePolicy(src)
	stage := mustStage(t, "shared", middleware.WithPolicy(p))
	r := rand.New(rand.NewPCG(seed(t), 3))
	streams := make([][]termination.Event, runs)
	for i := range streams {
		streams[i] = randomEvents(r, r.IntN(30))
	}
	type outcome struct {
		forwarded []int
		res       termination.Result
	}
	got := make([]outcome, runs)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range runs {
		wg.Go(func() {
			<-start
			items := itemsOf(streams[i])
			run, out := runWay(stage, i%4, items)
			got[i] = outcome{indices(out), run.Wait()}
		})
	}
	close(start)
	wg.Wait()
	fired := 0
	for i, g := range got {
		wantIdx, want := expected(p.Condition(), itemsOf(streams[i]))
		if want.StoppedAt > 0 {
			fired++
		}
		if !assert.Equal(t, wantIdx, g.forwarded, "run %d", i) || !assert.Empty(t, sameCounts(g.res, want), "run %d", i) {
			return
		}
		assert.Equal(t, "shared", g.res.Stage)
	}
	t.Logf("%d of %d runs stopped on an event", fired, runs)
}
