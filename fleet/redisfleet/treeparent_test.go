package redisfleet

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/redistest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// TestTreeWithParentAcrossProcesses (§8, clarified 2026-11-28: a holder's
// tree is shared whenever it has tree: limits): a child started in another
// process with middleware.WithParent(id) — a job queue carries only the id,
// no request names the tree — is charged to its parent's tree: limits and
// stopped when the tree's budget runs out, within the overshoot bound (a
// lease per process plus the event in flight). The parent is the holder
// itself, or a run under the holder in the holder's process (the child
// finds the holder from the parent's registry entry); the remote child
// spends itself, or through a run started from its context in its process
// (§8's third start path). The holder ends with BudgetExhausted{scope:
// tree}, the remote runs with Cancelled{reason: parent} naming it.
func TestTreeWithParentAcrossProcesses(t *testing.T) {
	const (
		limit    = 1000
		perEvent = 100 // tokens per event of the remote child
		lease    = limit / 100
	)
	for _, via := range []string{"holder", "holder's child", "holder, remote grandchild"} {
		t.Run(via, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, r redistest.Redis) {
				a := newTestFleet(t, r)
				c := startChild(t, r.URL(), a.cfg.prefix, 2*time.Second)
				planner, err := middleware.New("planner", middleware.WithParticipant(fleet.Membership(a)),
					middleware.WithPolicy(termination.MustParsePolicy("tree: {token_budget: {total: 1000}}")))
				if err != nil {
					t.Fatal(err)
				}
				pctx, p := planner.Start(t.Context())
				defer p.Finish(nil)
				parent := p
				if via == "holder's child" {
					researcher, err := middleware.New("researcher", middleware.WithParticipant(fleet.Membership(a)))
					if err != nil {
						t.Fatal(err)
					}
					_, parent = researcher.Start(pctx)
					defer parent.Finish(nil)
				}
				flushAll(t, a) // the job is queued once the runs are registered

				c.child("w", "worker", parent.ID())
				spender := "w"
				if via == "holder, remote grandchild" {
					c.sub("g", "worker", "w") // from w's context, in w's process
					spender = "g"
				}
				events := c.burn(spender, 130, perEvent-10, 10) // up to 13,000 tokens
				spent := events * perEvent
				if spent < limit || spent > limit+2*lease+perEvent {
					t.Errorf("the remote child spent %d tokens against the tree's %d (bound: %d past it)", spent, limit, 2*lease+perEvent)
				}
				wantParentStop(t, "the remote child", c.ended("w", 5*time.Second), "planner", termination.TagBudgetExhausted)
				if spender != "w" {
					wantParentStop(t, "the remote grandchild", c.ended(spender, 5*time.Second), "planner", termination.TagBudgetExhausted)
				}
				eventually(t, 5*time.Second, "the holder ends", func() bool {
					_, stopped := p.Cause()
					return stopped
				})
				pc, _ := p.Cause()
				if x, ok := pc.(termination.BudgetExhausted); !ok || x.Scope != termination.ScopeTree || x.Limit != limit || x.Resource != termination.ResourceTotalTokens {
					t.Errorf("the holder's cause = %#v, want BudgetExhausted{total_tokens, limit 1000, tree}", pc)
				}
				if parent != p {
					// The holder's cascade follows its stop in the same call.
					eventually(t, 5*time.Second, "the holder's child ends", func() bool {
						_, stopped := parent.Cause()
						return stopped
					})
					pc, _ := parent.Cause()
					parentCancelled(t, "the holder's child", pc, "planner ended: budget_exhausted")
				}
			})
		})
	}
}

// TestTreeStartPathsInOneProcess (§8: a child is a child however it was
// started, in the same process as in another): on one Fleet, a child
// started from the parent's context, with WithParent(id), or from the
// parent's propagated headers is charged to the parent's tree: limits at
// the event that spends them (the process links it to its parent), and a
// fleet stop of a parent without tree limits ends it at once with
// Cancelled{reason: parent, detail: "planner ended: cancelled"}.
func TestTreeStartPathsInOneProcess(t *testing.T) {
	paths := []struct {
		name  string
		start func(s *middleware.Stage, pctx context.Context, p *middleware.Run) (context.Context, *middleware.Run)
	}{
		{"context", func(s *middleware.Stage, pctx context.Context, _ *middleware.Run) (context.Context, *middleware.Run) {
			return s.Start(pctx)
		}},
		{"with_parent", func(s *middleware.Stage, _ context.Context, p *middleware.Run) (context.Context, *middleware.Run) {
			return s.Start(context.Background(), middleware.WithParent(p.ID()))
		}},
		{"propagator", func(s *middleware.Stage, pctx context.Context, _ *middleware.Run) (context.Context, *middleware.Run) {
			carrier := propagation.MapCarrier{}
			middleware.Propagator().Inject(pctx, carrier)
			return s.Start(middleware.Propagator().Extract(context.Background(), carrier))
		}},
	}
	redistest.Each(t, func(t *testing.T, r redistest.Redis) {
		f := newTestFleet(t, r)
		ctl := newTestControl(t, r, f.cfg.prefix)
		holder, err := middleware.New("planner", middleware.WithParticipant(fleet.Membership(f)),
			middleware.WithPolicy(termination.MustParsePolicy("tree: {token_budget: {total: 1000}}")))
		if err != nil {
			t.Fatal(err)
		}
		plain, err := middleware.New("planner", middleware.WithParticipant(fleet.Membership(f)))
		if err != nil {
			t.Fatal(err)
		}
		worker, err := middleware.New("worker", middleware.WithParticipant(fleet.Membership(f)))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range paths {
			t.Run(path.name+"/tree", func(t *testing.T) {
				pctx, p := holder.Start(t.Context())
				defer p.Finish(nil)
				_, c := path.start(worker, pctx, p)
				defer c.Finish(nil)
				n := 0
				var cause termination.Cause
				for stop := false; !stop && n < 130; {
					n++
					cause, stop = c.Observe(termination.Event{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: 90, OutputTokens: 10}})
				}
				if n != 10 {
					t.Errorf("the child stopped at its event %d, want the 10th (1,000 tokens of 1,000)", n)
				}
				parentCancelled(t, "the child", cause, "planner ended: budget_exhausted")
				pc, _ := p.Cause()
				if x, ok := pc.(termination.BudgetExhausted); !ok || x.Scope != termination.ScopeTree || x.Used != 1000 {
					t.Errorf("the holder's cause = %#v, want BudgetExhausted{total_tokens, 1000 of 1000, tree}", pc)
				}
			})
			t.Run(path.name+"/stop", func(t *testing.T) {
				pctx, p := plain.Start(t.Context())
				defer p.Finish(nil)
				cctx, c := path.start(worker, pctx, p)
				defer c.Finish(nil)
				if err := f.Flush(t.Context()); err != nil {
					t.Fatal(err)
				}
				if _, err := ctl.Stop(t.Context(), fleet.StopRequest{Selector: fleet.Selector{RunID: p.ID()}, Reason: "runaway", By: "ops"}); err != nil {
					t.Fatal(err)
				}
				select {
				case <-cctx.Done():
				case <-time.After(2 * time.Second):
					t.Fatal("the child is still running 2 s after its parent was stopped")
				}
				cc, _ := c.Cause()
				parentCancelled(t, "the child", cc, "planner ended: cancelled")
			})
		}
	})
}
