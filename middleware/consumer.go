package middleware

import "fmt"

// One consumer path per run. A run evaluates one stream, and its end is
// the end of that stream: the path that takes the stream (Forward,
// ForwardEach, ForwardSeq, ForwardSeqEach, Range, RangeEach) finishes the
// run when the stream ends, as Finish does for a loop that calls Observe.
// A second path on the same run would take items the first never sees,
// and the first to end would finish the run under the other: the items
// the other has not handed over yet would be drained, not delivered. So a
// second path, or a Finish while a path owns the stream, panics at once
// with a message that names the run and both paths, as sync.WaitGroup
// panics when it is reused: the misuse is in the code, it shows on the
// first run that takes it, and the path that owns the run goes on with
// nothing lost. Observe, ObserveEach and ObserveError take no stream: they
// may report events beside a path (an error the loop survives), and on a
// finished run they report the stop (stop is true), as on any stopped run.

// consumerPath is the path that consumes a run's stream (Run.consumer).
type consumerPath uint8

const (
	noPath consumerPath = iota
	pathForward
	pathForwardEach
	pathForwardSeq
	pathForwardSeqEach
	pathRange
	pathRangeEach
)

var pathNames = [...]string{"none", "Forward", "ForwardEach", "ForwardSeq", "ForwardSeqEach", "Range", "RangeEach"}

func (p consumerPath) String() string { return pathNames[p] }

// channel reports whether p is a channel forwarder, with a goroutine of
// its own (Forward, ForwardEach).
func (p consumerPath) channel() bool { return p == pathForward || p == pathForwardEach }

// claimLocked makes p the run's consumer path, with r.mu held. It returns
// the misuse, for the caller to panic with once it has let the lock go,
// when the run has a path already or Finish has been called.
func (r *Run) claimLocked(p consumerPath) error {
	switch {
	case r.consumer != noPath:
		return fmt.Errorf("middleware: %s: run %s of stage %q is already consumed by %s: a run takes one stream, through one of Forward, ForwardEach, ForwardSeq, ForwardSeqEach, Range and RangeEach, ranged once (or Observe and Finish); start a run per stream with Stage.Start",
			p, r.id, r.stage.name, r.consumer)
	case r.finishing:
		return fmt.Errorf("middleware: %s: run %s of stage %q is already finished (Finish was called): its stream would not be evaluated; start a run per stream with Stage.Start",
			p, r.id, r.stage.name)
	}
	r.consumer = p
	return nil
}

// claim is claimLocked, taking the lock; it panics on misuse.
func (r *Run) claim(p consumerPath) {
	r.mu.Lock()
	err := r.claimLocked(p)
	r.mu.Unlock()
	if err != nil {
		panic(err)
	}
}

// finishMisuse is the misuse of a Finish called while p, the run's
// consumer path, owns its stream.
func (r *Run) finishMisuse(p consumerPath) error {
	how := "to end it early, call Run.Stop from outside the loop or break out of the range loop, then use the result of Run.Wait"
	if p.channel() {
		how = "to end it early, call Run.Stop, or Run.Leave when the consumer stops reading (a Finish after Leave waits for the forwarder), then use the result of Run.Wait"
	}
	return fmt.Errorf("middleware: Finish: run %s of stage %q is consumed by %s, which finishes it when its stream ends (a Finish now would drain what it has not handed over); %s",
		r.id, r.stage.name, p, how)
}
