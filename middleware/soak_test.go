package middleware_test

import (
	"flag"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

var soak = flag.Bool("soak", false, "run the soak test: over 1,000,000 events evaluated in 1,000 concurrent runs")

// laxPolicy has every condition with limits the random streams rarely
// reach, so that most of a soak run's events are evaluated, not drained.
const laxPolicy = `{max_iterations: 100000, max_tool_calls: 100000, token_budget: {total: 1000000000, pressure: 0.9},
  stall: {repeats: 50}, errors: {total: 100000}, text_mention: {text: NEVER-SAID}, function_call: [never_called]}`

// TestSoak offers 2,000,000 events to 1,000 concurrent runs, each on a
// stage with a random policy (half of them lax, so that over a million
// events are evaluated; the runs that stop early drain or cancel the rest),
// through every way in. Every run's result must equal replaying
// its own events, and goleak (TestMain) checks that nothing is left running.
func TestSoak(t *testing.T) {
	if !*soak {
		t.Skip("soak test: run with -soak (make soak)")
	}
	const (
		runs      = 1000
		perRun    = 2000
		policies  = 64
		eachStage = runs / policies
	)
	r := rand.New(rand.NewPCG(seed(t), 99))
	stages := make([]*middleware.Stage, policies)
	conds := make([]termination.Condition, policies)
	for i := range stages {
		src := laxPolicy
		if i%2 == 1 {
			src = randomPolicy(r, 0)
		}
		p, err := termination.ParsePolicy([]byte(src))
		if err != nil {
			t.Fatalf("policy %q: %v", src, err)
		}
		stages[i], conds[i] = mustStage(t, "soak", middleware.WithPolicy(p)), p.Condition()
	}
	var evaluated, drained, offered atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan string, runs)
	for i := range runs {
		stream := randomEvents(rand.New(rand.NewPCG(uint64(i), 7)), perRun)
		wg.Go(func() {
			<-start
			k := i % policies
			items := itemsOf(stream)
			run, out := runWay(stages[k], i%4, items)
			res := run.Wait()
			evaluated.Add(int64(res.Events))
			drained.Add(int64(res.Drained))
			offered.Add(int64(len(items)))
			wantIdx, want := expected(conds[k], items)
			if d := sameCounts(res, want); d != "" {
				errs <- d
			} else if len(out) != len(wantIdx) {
				errs <- "forwarded items differ from replay"
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	t.Logf("%d events offered, %d evaluated, %d drained, in %d runs on %d stages", offered.Load(), evaluated.Load(), drained.Load(), runs, policies)
	if evaluated.Load() < 1_000_000 {
		t.Errorf("evaluated %d events, want over a million", evaluated.Load())
	}
}
