package tree

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentstop/agentstop/termination"
)

// fakeRun is a tree.Run that records what its node asks of it.
type fakeRun struct {
	mu       sync.Mutex
	id       string
	stopped  []termination.Cause
	warnings []termination.Cause
}

func (f *fakeRun) ID() string { return f.id }
func (f *fakeRun) StopWith(c termination.Cause) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.stopped) > 0 {
		return false
	}
	f.stopped = append(f.stopped, c)
	return true
}
func (f *fakeRun) StopFired(fired []termination.Cause, _ bool) bool { return f.StopWith(fired[0]) }
func (f *fakeRun) Warn(c termination.Cause) {
	f.mu.Lock()
	f.warnings = append(f.warnings, c)
	f.mu.Unlock()
}
func (f *fakeRun) DeliverWarnings()                                     {}
func (f *fakeRun) HoldOn(<-chan struct{}, termination.Cause, time.Time) {}
func (f *fakeRun) Release(<-chan struct{})                              {}
func (f *fakeRun) Raised(termination.Limits)                            {}
func (f *fakeRun) EachLive(fn func(Run))                                { fn(f) }

func tagOf(c termination.Cause) string { return termination.Tag(c, nil) }

// A shared tree's holder is charged what other processes spent in
// batches, and feeds its limits only as many events as can change
// anything (one message for any number of iterations when iterations are
// unlimited). Result.Tree still counts every one of them.
func TestTreeTotalsCountBatchedCharges(t *testing.T) {
	s := NewStage("planner", tagOf, termination.TokenLimits{Total: 100000}, nil, nil)
	_, n := s.Join(context.Background(), &fakeRun{id: "r1"}, Parent{})
	if n == nil {
		t.Fatal("a run that holds tree limits has no node")
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	ev := &termination.Event{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: 10}}
	if fired := n.Enter(); fired != nil {
		t.Fatalf("Enter = %v before any limit fired", fired)
	}
	n.Exit(ev, true)
	u := Usage{Totals: termination.Totals{Iterations: 5, ToolCalls: 3, Tokens: termination.Usage{InputTokens: 100, OutputTokens: 20}, Cost: 0.5}, Final: termination.Totals{Iterations: 2, Tokens: termination.Usage{OutputTokens: 5}, Cost: 0.1}}
	n.charge(u)
	n.charge(u)
	var res termination.Result
	n.End(&res)
	want := termination.Totals{Iterations: 11, ToolCalls: 6, Tokens: termination.Usage{InputTokens: 210, OutputTokens: 40}, Cost: 1}
	if res.Tree == nil || *res.Tree != want {
		t.Fatalf("Result.Tree = %+v, want %+v", res.Tree, want)
	}
}

// A run that holds no tree limits and whose parent has no node needs no
// node; a child of a holder has one, counted by the holder's limits.
func TestJoinOnlyUnderLimits(t *testing.T) {
	plain := NewStage("worker", tagOf, nil, nil, nil)
	if _, n := plain.Join(context.Background(), &fakeRun{id: "a"}, Parent{ID: "p"}); n != nil {
		t.Fatal("a run under no tree limits got a node")
	}
	holder := NewStage("planner", tagOf, termination.IterationLimits{Limit: 1}, nil, nil)
	hr := &fakeRun{id: "h"}
	_, h := holder.Join(context.Background(), hr, Parent{})
	if err := h.Start(); err != nil {
		t.Fatal(err)
	}
	kr := &fakeRun{id: "k"}
	_, k := plain.Join(context.Background(), kr, Parent{ID: "h", Node: h})
	if k == nil {
		t.Fatal("a holder's child got no node")
	}
	if err := k.Start(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if fired := k.Enter(); fired != nil {
			if i == 0 {
				t.Fatalf("event %d: Enter = %v", i, fired)
			}
			if len(hr.stopped) != 1 {
				t.Fatalf("the holder was stopped with %v, want its limit's cause", hr.stopped)
			}
			if c, ok := fired[0].(termination.Cancelled); !ok || c.Reason != termination.CancelParent {
				t.Fatalf("the child ends with %v, want Cancelled{reason: parent}", fired[0])
			}
			return
		}
		if k.Exit(&termination.Event{Kind: termination.KindMessage}, true) {
			k.Settle()
		}
	}
	t.Fatal("the holder's limit never fired")
}
