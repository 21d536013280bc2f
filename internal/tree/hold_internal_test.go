package tree

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agentstop/agentstop/termination"
)

// heldRun is a fakeRun that records the holds its node puts on it.
type heldRun struct {
	fakeRun
	held     <-chan struct{}
	released int
}

func (r *heldRun) HoldOn(ch <-chan struct{}, _ termination.Cause, _ time.Time) {
	r.mu.Lock()
	r.held = ch
	r.mu.Unlock()
}

func (r *heldRun) Release(ch <-chan struct{}) {
	r.mu.Lock()
	if r.held == ch {
		r.held, r.released = nil, r.released+1
	}
	r.mu.Unlock()
}

func (r *heldRun) EachLive(fn func(Run)) { fn(r) }

// joinSharer is a Sharer whose trees any run joins: it keeps the joined
// run's SharedRun, and its members raise with raiseErr.
type joinSharer struct {
	mu       sync.Mutex
	run      SharedRun
	raised   []termination.Limits
	raiseErr error
}

func (s *joinSharer) HoldTree(Spec, Usage, SharedRun) Member { return joinMember{s} }
func (s *joinSharer) JoinTree(_ context.Context, _ string, run SharedRun) Member {
	s.mu.Lock()
	s.run = run
	s.mu.Unlock()
	return joinMember{s}
}
func (s *joinSharer) TreesOf(context.Context, string) []string { return nil }

type joinMember struct{ s *joinSharer }

func (joinMember) Spend(Usage) termination.Cause { return nil }
func (joinMember) Warn(termination.Cause)        {}
func (joinMember) Leave(termination.Cancelled)   {}
func (m joinMember) RaiseTree(l termination.Limits) error {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	m.s.raised = append(m.s.raised, l)
	return m.s.raiseErr
}

// A joined run that its fleet holds at a remote holder's tree limit
// (SharedRun.HoldTree) is held with its live descendants (HeldAt says at
// what); its Raise must name the limit's resource and is sent to the
// fleet (Raiser), whose answer it returns; ReleaseTree lets it go on.
func TestJoinedRunHeldByFleet(t *testing.T) {
	sharer := &joinSharer{}
	s := NewStage("kid", tagOf, nil, nil, sharer)
	run := &heldRun{fakeRun: fakeRun{id: "k"}}
	_, n := s.Join(context.Background(), run, Parent{ID: "h", Holders: []string{"h"}})
	if n == nil {
		t.Fatal("a run that may join a remote tree has no node")
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	iters := termination.Limits{Iterations: 2, Has: termination.LimitIterations}
	if err := n.Raise(iters); !errors.Is(err, termination.ErrNotHeld) {
		t.Fatalf("Raise before any hold = %v, want ErrNotHeld", err)
	}
	at := termination.MaxIterationsReached{Limit: 3, Count: 4, Scope: termination.ScopeTree}
	sharer.run.HoldTree(at)
	sharer.run.HoldTree(at) // held once
	ch, c, _ := n.HeldAt()
	if ch == nil || c != at || run.held != ch {
		t.Fatalf("HeldAt = %v, %v (run held on %v); want the fleet's hold at %v", ch, c, run.held, at)
	}
	for _, tc := range []struct {
		name     string
		l        termination.Limits
		raiseErr error
		want     error
		sent     int
	}{
		{"the wrong resource", termination.Limits{ToolCalls: 1, Has: termination.LimitToolCalls}, nil, termination.ErrNotHeld, 0},
		{"the holder not held", iters, termination.ErrNotHeld, termination.ErrNotHeld, 1},
		{"raised", iters, nil, nil, 1},
	} {
		sharer.mu.Lock()
		sharer.raised, sharer.raiseErr = nil, tc.raiseErr
		sharer.mu.Unlock()
		err := n.Raise(tc.l)
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%s: Raise = %v, want %v", tc.name, err, tc.want)
		}
		if len(sharer.raised) != tc.sent {
			t.Errorf("%s: %d raises sent to the fleet, want %d", tc.name, len(sharer.raised), tc.sent)
		}
	}
	sharer.run.ReleaseTree()
	if ch, _, _ := n.HeldAt(); ch != nil || run.held != nil || run.released != 1 {
		t.Fatalf("after ReleaseTree: HeldAt %v, run held on %v, released %d times; want released once", ch, run.held, run.released)
	}
}
