package redisfleet

import (
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/redistest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// TestTreeLimitsSharedThroughFleets (§8 "Across processes", with §7's
// leases): a planner holding a tree: token budget runs on one Fleet;
// researchers started from its propagated headers run on two others (three
// processes' worth of fleets on one server or cluster), all spending at
// once. The tree's limit holds for all of them: the planner ends with
// BudgetExhausted{scope: tree}, every researcher with Cancelled{reason:
// parent} naming it, and what the tree spent past the limit is within the
// documented bound (a lease per process plus the events in flight).
func TestTreeLimitsSharedThroughFleets(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Redis) {
		const (
			limit    = 50_000
			perEvent = 500 // tokens per researcher event
			workers  = 3   // researchers per callee process
		)
		prefix := testPrefix(t)
		mk := func() *Fleet { return newTestFleet(t, srv, WithPrefix(prefix), WithLease(time.Second)) }
		fa, fb, fc := mk(), mk(), mk()
		planner, err := middleware.New("planner", middleware.WithParticipant(fleet.Membership(fa)),
			middleware.WithPolicy(termination.MustParsePolicy(`tree: {token_budget: {total: 50000}}`)))
		if err != nil {
			t.Fatal(err)
		}
		pctx, p := planner.Start(t.Context())
		carrier := propagation.MapCarrier{}
		middleware.Propagator().Inject(pctx, carrier)
		if carrier[middleware.TreeHeader] != p.ID() {
			t.Fatalf("the request does not name the holder: %v", carrier)
		}
		// The holder's record is written by its process's next sync.
		if err := fa.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}

		var mu sync.Mutex
		var results []termination.Result
		var wg sync.WaitGroup
		for _, f := range []*Fleet{fb, fc} {
			stage, err := middleware.New("researcher", middleware.WithParticipant(fleet.Membership(f)))
			if err != nil {
				t.Fatal(err)
			}
			for range workers {
				ctx := middleware.Propagator().Extract(t.Context(), carrier)
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, r := stage.Start(ctx)
					deadline := time.Now().Add(20 * time.Second)
					for time.Now().Before(deadline) {
						if _, stop := r.Observe(termination.Event{Kind: termination.KindMessage,
							Usage: termination.Usage{InputTokens: perEvent - 100, OutputTokens: 100}}); stop {
							break
						}
					}
					res := r.Finish(nil)
					mu.Lock()
					results = append(results, res)
					mu.Unlock()
				}()
			}
		}
		wg.Wait()
		// The researchers' processes found the tree spent and told the
		// planner's, which ends the holder.
		eventually(t, 5*time.Second, "the planner ends", func() bool {
			_, stopped := p.Cause()
			return stopped
		})
		pres := p.Finish(nil)

		x, ok := pres.Cause.(termination.BudgetExhausted)
		if !ok || x.Scope != termination.ScopeTree || x.Resource != termination.ResourceTotalTokens || x.Limit != limit {
			t.Fatalf("planner: cause = %#v, want BudgetExhausted{total_tokens, limit %d, scope tree}", pres.Cause, limit)
		}
		var spent int64
		for i, res := range results {
			spent += res.Tokens.Total()
			c, ok := res.Cause.(termination.Cancelled)
			if !ok || c.Reason != termination.CancelParent || c.Detail != "planner ended: budget_exhausted" {
				t.Errorf("researcher %d: cause = %#v, want Cancelled{parent, planner ended: budget_exhausted}", i, res.Cause)
			}
		}
		// Bound: a lease (1% of the limit by default) per process taking
		// part, plus one event in flight per researcher.
		bound := int64(3*limit/100 + 2*workers*perEvent)
		if spent < limit-int64(3*limit/100) {
			t.Errorf("the tree stopped after %d tokens of %d: far short of its limit", spent, limit)
		}
		if spent > limit+bound {
			t.Errorf("the tree spent %d tokens against a limit of %d: %d past it, bound %d", spent, limit, spent-limit, bound)
		}
		t.Logf("tree spent %d tokens of %d (%+d; bound %d)", spent, limit, spent-limit, bound)
	})
}
