package middleware

import (
	"fmt"
	"iter"
	"time"

	"github.com/agentstop/agentstop/termination"
)

// Range guards a channel-based loop from the consumer's side: ranging over
// the returned iterator receives the items of in, in order, while every
// item's event (decode) is evaluated by run, in the consumer's own
// goroutine:
//
//	for item := range middleware.Range(run, in, decode) { ... }
//
// It is RangeEach for decode functions that return one event per item; see
// RangeEach for what happens when the run stops, and for the one stream a
// run takes.
func Range[T any](run *Run, in <-chan T, decode func(T) termination.Event) iter.Seq[T] {
	return rangeChan(run, in, decode == nil, pathRange, func() *forwarder[T] { return &forwarder[T]{run: run, decodeOne: decode, w: new(work[T])} })
}

// RangeEach is Range for decode functions that turn one item into zero or
// more events, as ForwardEach does: an event with Kind 0 is skipped; any
// other invalid event (see termination.Event.Validate) ends the run with
// Failed{reason: invalid_input}.
//
// Range and RangeEach start no goroutine and add no channel hop: each item
// is received, evaluated and handed to the loop body by the goroutine that
// ranges, so a guarded loop costs its bare `for item := range in` plus the
// evaluation. They keep Forward's guarantees:
//
//   - When a condition fires on an item, that item is still yielded, then
//     the loop ends. An item whose decode function panicked ends the run
//     with Failed{reason: panic} and is yielded the same way.
//   - When the run stops from outside (timeout timer, Run.Stop, the
//     caller's context, a fleet), its context is cancelled and the loop
//     ends at the producer's next step: when it closes in, as a producer
//     that honours the run's context does at once, or at its next item,
//     which is not evaluated or yielded (it counts as drained). Range waits
//     for the producer as a bare range loop does, so a producer that
//     ignores its context holds the loop as it would hold a bare one; use
//     Forward for such a loop. An item already yielded was evaluated: the
//     body never sees an item the run did not evaluate, and sees every item
//     it did, so Result.Events counts exactly the events of the items the
//     body received.
//   - A loop body that breaks out ends the run right after the final
//     answer as if the stream had ended there (NaturalCompletion), and with
//     Cancelled{reason: external, detail: "consumer stopped iterating"}
//     otherwise. A panic in the body ends the run with Failed{reason:
//     panic}, then goes on up.
//   - Once the loop ends before in is closed, the rest of in is drained
//     (counted in Result.Drained) so that the producer never blocks: the
//     drain runs in the ranging goroutine when the range loop ends, so the
//     range statement returns once the producer has closed in — at once
//     for a producer that honours the run's context, which the stop has
//     cancelled — and at the latest after the drain timeout
//     ([WithDrainTimeout]).
//
// The run is finished (Run.Wait returns) when the range statement returns;
// a consumer that breaks out has nothing more to do. A nil run, channel or
// decode function yields nothing; the run, if any, ends with
// Failed{reason: invalid_input}.
//
// A run takes one stream, and the iterator is ranged once: ranging it on a
// run that another path (Forward, ForwardSeq, ..., or this iterator in an
// earlier range statement) already consumes, or that Finish has finished,
// panics with a message naming the run and both paths, before anything is
// received from in. Run.Finish from the loop body (or elsewhere while the
// range runs) panics too: break out of the loop instead.
//
// Use Range when the consumer is a loop in one goroutine and the producer
// honours the run's context: it is the cheapest guard. Use Forward when the
// guarded stream must stay a channel (it is handed to code that selects on
// it, or fans out), or when the consumer must be able to walk away without
// waiting for the producer: Forward ends its output when the run stops,
// whatever the producer does, and drains in its own goroutine.
func RangeEach[T any](run *Run, in <-chan T, decode func(item T, emit func(termination.Event))) iter.Seq[T] {
	return rangeChan(run, in, decode == nil, pathRangeEach, func() *forwarder[T] { return newEachForwarder(run, decode) })
}

// rangeChan is Range and RangeEach (path): newForwarder makes the
// forwarder of one iteration (its observe step is Forward's).
func rangeChan[T any](run *Run, in <-chan T, nilDecode bool, path consumerPath, newForwarder func() *forwarder[T]) iter.Seq[T] {
	return func(yield func(T) bool) {
		if checkInput(run, in == nil, nilDecode, path, "channel") != nil {
			return
		}
		newForwarder().rangeOver(in, yield)
	}
}

// How a Range loop ended.
const (
	rangeClosed   = iota // in was closed: the stream's end decides
	rangeStopped         // the run stopped (on an item or from outside)
	rangeLeft            // the loop body broke out
	rangePanicked        // the loop body panicked
)

// rangeOver is the loop of Range: receive, evaluate, yield, in the
// ranging goroutine, then the end of the run.
func (f *forwarder[T]) rangeOver(in <-chan T, yield func(T) bool) {
	run := f.run
	how, panicked := f.rangeItems(in, yield)
	switch how {
	case rangeLeft:
		// Right after the final answer: as if the stream ended there
		// (NaturalCompletion); otherwise Cancelled{external}.
		run.stopLeaving(f.final, "consumer stopped iterating")
	case rangePanicked:
		// A panic from the consumer's own loop body is theirs: end the
		// run, then let it go on.
		run.fail(termination.FailPanic, fmt.Errorf("middleware: stage %q: panic during iteration: %v", run.stage.name, panicked))
	}
	if how != rangeClosed {
		f.drainRange(in)
	}
	run.finishPath()
	if how == rangePanicked {
		panic(panicked)
	}
}

// rangeItems receives, evaluates and yields items until in is closed, the
// run stops or the loop body leaves, and says which.
//
// It waits for the producer with a plain receive, as the bare loop does: a
// select that also watched the run's stop would cost a two-case select per
// item, most of them blocking (producer and consumer take turns on one
// core). A stop from outside cancels the run's context, which tells the
// producer to close in; an item received after the stop is not evaluated
// or yielded.
func (f *forwarder[T]) rangeItems(in <-chan T, yield func(T) bool) (how int, panicked any) {
	defer func() {
		if p := recover(); p != nil {
			how, panicked = rangePanicked, p
		}
	}()
	for item := range in {
		what := f.observe(&item)
		if what == itemLate {
			// Stopped from outside before this item: drained, not yielded.
			return rangeStopped, nil
		}
		if !yield(item) {
			return rangeLeft, nil
		}
		if what == itemFired {
			return rangeStopped, nil
		}
	}
	return rangeClosed, nil
}

// drainRange receives and discards the rest of in until it is closed, so
// that the producer never blocks, giving up after the drain timeout.
func (f *forwarder[T]) drainRange(in <-chan T) {
	run := f.run
	n := 0
	var t *time.Timer
	var expired <-chan time.Time
	for {
		select {
		case _, ok := <-in:
			if !ok {
				run.addDrained(n)
				if t != nil {
					t.Stop()
				}
				return
			}
			n++
			continue
		default:
		}
		if t == nil {
			// The producer has not closed in yet: from now on, bounded.
			t = time.NewTimer(run.stage.cfg.drainTimeout)
			expired = t.C
		}
		select {
		case _, ok := <-in:
			if !ok {
				run.addDrained(n)
				t.Stop()
				return
			}
			n++
		case <-expired:
			run.addDrained(n)
			run.report(fmt.Errorf("middleware: stage %q: producer did not close its channel within %s of draining; giving up", run.stage.name, run.stage.cfg.drainTimeout))
			return
		}
	}
}
