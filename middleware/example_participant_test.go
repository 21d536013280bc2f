package middleware_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// quota is a participant that limits a run from outside its own events:
// an account's daily token quota, kept by some service. Its part is told
// each event's usage (a Spender, without the run's lock) and stops the
// run when the quota is spent; a real one would also be a Starter that
// refuses runs of an account already over its quota.
type quota struct {
	mu   sync.Mutex
	left int64
}

func (q *quota) Join(ctx context.Context, _ *middleware.Run) (context.Context, middleware.Part) {
	return ctx, quotaPart{q}
}

type quotaPart struct{ q *quota }

func (quotaPart) Event(*termination.Event)  {}
func (quotaPart) Warning(termination.Cause) {}
func (quotaPart) Error(error)               {}
func (quotaPart) End(*termination.Result)   {}

// Spend charges the event's tokens to the quota; the run ends with the
// returned cause as if a condition had fired on the event.
func (p quotaPart) Spend(u termination.Usage, _ float64) (warning, stop termination.Cause) {
	p.q.mu.Lock()
	defer p.q.mu.Unlock()
	p.q.left -= u.InputTokens + u.OutputTokens
	if p.q.left < 0 {
		return nil, termination.Custom{Reason: "quota_spent"}
	}
	return nil, nil
}

// A new kind of limit is a participant, not a change to the run: the
// stage is given it with WithParticipant, and every run of the stage takes
// part in it.
func ExampleParticipant() {
	stage, _ := middleware.New("support",
		middleware.WithPolicy(termination.MustParsePolicy("max_iterations: 50")),
		middleware.WithParticipant(&quota{left: 1000}),
		middleware.WithCustomReasons("quota_spent"))
	_, run := stage.Start(context.Background())
	for range 10 {
		if _, stop := run.Observe(termination.Event{Kind: termination.KindMessage,
			Usage: termination.Usage{InputTokens: 300, OutputTokens: 100}}); stop {
			break
		}
	}
	res := run.Finish(nil)
	fmt.Println(res.Tag(), "after", res.Events, "events")
	// Output:
	// quota_spent after 3 events
}
