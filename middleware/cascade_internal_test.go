package middleware

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentstop/agentstop/termination"
)

// endOrder is a participant that notes, in one list for all runs, the
// order in which their ends are recorded (what an event log writes as end
// records: StopRecorder's Stopped, else End).
type endOrder struct {
	mu   sync.Mutex
	ends []string // "STAGE TAG"
}

func (o *endOrder) Join(_ context.Context, r *Run) (context.Context, Part) {
	return nil, &endOrderPart{o: o, stage: r.stage.name}
}

func (o *endOrder) list() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.ends...)
}

type endOrderPart struct {
	o     *endOrder
	stage string
	told  bool
}

func (p *endOrderPart) Event(*termination.Event)        {}
func (p *endOrderPart) Warning(termination.Cause)       {}
func (p *endOrderPart) Error(error)                     {}
func (p *endOrderPart) End(res *termination.Result)     { p.note(res) }
func (p *endOrderPart) Stopped(res *termination.Result) { p.note(res) }
func (p *endOrderPart) note(res *termination.Result) {
	if p.told {
		return
	}
	p.told = true
	p.o.mu.Lock()
	p.o.ends = append(p.o.ends, p.stage+" "+res.Tag())
	p.o.mu.Unlock()
}

// setStoppedHook sets testHookStopped for the test's duration: f is
// called once, for the first stop of a run that match accepts.
func setStoppedHook(t *testing.T, match func(*Run) bool, f func(r *Run, c termination.Cause)) {
	t.Helper()
	var once sync.Once
	h := func(r *Run, c termination.Cause) {
		if match(r) {
			once.Do(func() { f(r, c) })
		}
	}
	testHookStopped.Store(&h)
	t.Cleanup(func() { testHookStopped.Store(nil) })
}

func newStage(t *testing.T, name string, opts ...Option) *Stage {
	t.Helper()
	s, err := New(name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestEndRecordedWhenDecided: a run's end is recorded in the critical
// section that decides its cause. Before, it was recorded as stopped
// began, after the lock was let go: a parent that ended in that window
// recorded its end first, and its cascade found the child already ended,
// so the log said "parent ended, then the child ended on its own" —
// replay cascades the parent's end to the child instead (a child's hold
// timeout and its parent's timeout firing together under load did this
// in TestRecordedHoldsReplayAsLive).
func TestEndRecordedWhenDecided(t *testing.T) {
	var o endOrder
	parent := newStage(t, "parent", WithParticipant(&o))
	child := newStage(t, "child", WithParticipant(&o))
	pctx, p := parent.Start(context.Background())
	_, c := child.Start(pctx)
	setStoppedHook(t, func(r *Run) bool { return r == c }, func(*Run, termination.Cause) {
		p.Stop("supervisor") // in the window: the child's cause is decided
	})
	c.Stop("its own")
	if got := c.Finish(nil).Cause; got != (termination.Cancelled{Reason: termination.CancelExternal, Detail: "its own"}) {
		t.Fatalf("child's cause = %v, want its own stop", got)
	}
	p.Finish(nil)
	want := []string{"child cancelled", "parent cancelled"}
	if got := o.list(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("ends recorded in the order %q, want %q: the child ended before its parent", got, want)
	}
}

// TestParentContextEndsAfterCascade: when a run's context is cancelled,
// every live child of it has ended with Cancelled{reason: parent}, even
// when another goroutine finishes the run while the cascade is under way.
// Before, the second stop skipped the cascade that the first had begun
// and cancelled the context at once: a child the cascade had not reached
// yet was ended by its watch of the parent's context, with
// Cancelled{reason: context} (seen in TestRecordedHoldsReplayAsLive under
// load: a held tree's hold timeout and the loop's Finish of its holder).
func TestParentContextEndsAfterCascade(t *testing.T) {
	parent := newStage(t, "parent")
	child := newStage(t, "child")
	pctx, p := parent.Start(context.Background())
	_, a := child.Start(pctx)
	_, b := child.Start(pctx)
	want := termination.Cancelled{Reason: termination.CancelParent, Detail: "parent ended: cancelled"}
	others := 0
	setStoppedHook(t, func(r *Run) bool { return r == a || r == b }, func(r *Run, _ termination.Cause) {
		p.Finish(nil) // another goroutine's Finish, while the cascade is under way
		<-p.Done()
		for _, k := range []*Run{a, b} {
			if k == r {
				continue
			}
			others++
			if got, stopped := k.Cause(); !stopped || got != termination.Cause(want) {
				t.Errorf("parent's context cancelled while its child has cause %v (stopped %v), want %v", got, stopped, want)
			}
		}
	})
	p.Stop("")
	for _, k := range []*Run{a, b} {
		if got := k.Finish(nil).Cause; got != termination.Cause(want) {
			t.Errorf("child's cause = %v, want %v", got, want)
		}
	}
	if others != 1 {
		t.Fatalf("the hook checked %d other children, want 1", others)
	}
}

// slowEnd is endOrder with a recorder that, for one stage's runs, waits
// before it notes the end (a recorder slow to write a line: an event log
// encodes the record first), having said so on in.
type slowEnd struct {
	endOrder
	stage string
	in    chan struct{}
	goOn  chan struct{}
	noted chan string // each end as it is noted
}

func (o *slowEnd) Join(_ context.Context, r *Run) (context.Context, Part) {
	return nil, &slowEndPart{o: o, stage: r.stage.name}
}

type slowEndPart struct {
	o     *slowEnd
	stage string
	told  bool
}

func (p *slowEndPart) Event(*termination.Event)        {}
func (p *slowEndPart) Warning(termination.Cause)       {}
func (p *slowEndPart) Error(error)                     {}
func (p *slowEndPart) End(res *termination.Result)     { p.note(res) }
func (p *slowEndPart) Stopped(res *termination.Result) { p.note(res) }
func (p *slowEndPart) note(res *termination.Result) {
	if p.told {
		return
	}
	p.told = true
	if p.stage == p.o.stage {
		close(p.o.in)
		<-p.o.goOn
	}
	p.o.mu.Lock()
	p.o.ends = append(p.o.ends, p.stage+" "+res.Tag())
	p.o.mu.Unlock()
	p.o.noted <- p.stage
}

// TestChildEndBeforeConcurrentParentEnd: a child whose cause is decided
// while its parent ends in another goroutine has its end recorded before
// its parent's, however slow its recorder: the parent's end waits for the
// child's lock before it is recorded. Before, the parent recorded its end
// at once and its cascade found the child ended, so the log had the
// child end on its own after its parent's end, which replay cascades
// (seen in TestRecordedHoldsReplayAsLive under load: a child's hold
// timeout and its parent's timeout, both timers late).
func TestChildEndBeforeConcurrentParentEnd(t *testing.T) {
	o := &slowEnd{stage: "child", in: make(chan struct{}), goOn: make(chan struct{}), noted: make(chan string, 2)}
	parent := newStage(t, "parent", WithParticipant(o))
	child := newStage(t, "child", WithParticipant(o))
	pctx, p := parent.Start(context.Background())
	_, c := child.Start(pctx)
	cDone, pDone := make(chan struct{}), make(chan struct{})
	go func() { c.Stop("its own"); close(cDone) }()
	<-o.in // the child's cause is decided; its recorder is slow
	go func() { p.Stop("supervisor"); close(pDone) }()
	select {
	case <-o.noted: // the parent's end noted first: the bug
	case <-time.After(100 * time.Millisecond): // the parent's end waits for the child (it cannot be seen waiting)
	}
	close(o.goOn)
	<-cDone
	<-pDone
	p.Finish(nil)
	c.Finish(nil)
	want := []string{"child cancelled", "parent cancelled"}
	if got := o.list(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("ends recorded in the order %q, want %q", got, want)
	}
	if got := c.Wait().Cause; got != (termination.Cancelled{Reason: termination.CancelExternal, Detail: "its own"}) {
		t.Fatalf("child's cause = %v, want its own stop", got)
	}
}
