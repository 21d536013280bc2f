package middleware

import (
	"context"
	"testing"

	"github.com/agentstop/agentstop/termination"
	"github.com/agentstop/agentstop/tree"
)

// A shared tree's holder is charged what other processes spent in
// batches, and feeds its limits only as many events as can change
// anything (one message for any number of iterations when iterations are
// unlimited). Result.Tree still counts every one of them.
func TestTreeTotalsCountBatchedCharges(t *testing.T) {
	s, err := New("planner", WithTreeLimits(termination.TokenLimits{Total: 100000}))
	if err != nil {
		t.Fatal(err)
	}
	_, r := s.Start(context.Background())
	r.Observe(termination.Event{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: 10}})
	r.mu.Lock()
	tr := r.tree
	r.mu.Unlock()
	u := tree.Usage{Totals: termination.Totals{Iterations: 5, ToolCalls: 3, Tokens: termination.Usage{InputTokens: 100, OutputTokens: 20}, Cost: 0.5}, Final: termination.Totals{Iterations: 2, Tokens: termination.Usage{OutputTokens: 5}, Cost: 0.1}}
	tr.charge(u)
	tr.charge(u)
	res := r.Finish(nil)
	want := termination.Totals{Iterations: 11, ToolCalls: 6, Tokens: termination.Usage{InputTokens: 210, OutputTokens: 40}, Cost: 1}
	if res.Tree == nil || *res.Tree != want {
		t.Fatalf("Result.Tree = %+v, want %+v", res.Tree, want)
	}
}
