package termination

import "time"

// indexHolder is implemented by the checks that keep event indices for
// their evidence (see witness): heldEvents calls f with each of them, read
// on event now (the run's events so far).
type indexHolder interface{ heldEvents(now int, f func(at int)) }

// heldEvents calls f with every event index c keeps for its evidence.
func heldEvents(c check, now int, f func(at int)) {
	if h, ok := c.(indexHolder); ok {
		h.heldEvents(now, f)
	}
}

func (a *anyCheck) heldEvents(now int, f func(int)) {
	for _, ch := range a.children {
		heldEvents(ch, now, f)
	}
}

func (a *allCheck) heldEvents(now int, f func(int)) {
	for _, at := range a.proof {
		f(at)
	}
	for _, ch := range a.children {
		heldEvents(ch, now, f)
	}
}

func (c *stallCheck) heldEvents(now int, f func(int)) {
	rings := []*ring[keyAt]{&c.calls, &c.msgs, &c.tokens}
	if c.sameResultState != nil {
		rings = append(rings, &c.results)
	}
	for _, r := range rings {
		for _, k := range r.buf {
			f(k.index(now))
		}
	}
}

func (c *errorCheck) heldEvents(_ int, f func(int)) {
	if c.errorWindows == nil {
		return // no failure yet
	}
	for _, r := range [...]*ring[int]{&c.resultIdx, &c.errorIdx} {
		for _, at := range r.buf {
			f(at)
		}
	}
	c.allIdx.each(f)
}

func (c *countCheck) heldEvents(_ int, f func(int)) { f(c.finalAt) }

func (b *budgetCheck) heldEvents(_ int, f func(int)) {
	f(b.warnedAt())
	for i := range b.limits {
		f(b.state(i).finalAt)
		f(b.state(i).finalWarnAt)
	}
}

// HeldEvidence appends to dst the 1-based indices of the events that the
// conditions still hold for their evidence (a stall's window, an error
// streak, the event that reached a limit) and returns it, in no order: the
// events a later Result's Evidence can still name. A replay that describes
// evidence (replay.WithEvidence) keeps notes of those events only.
func (e *Evaluator) HeldEvidence(dst []int) []int {
	heldEvents(e.root, e.progress.Events, func(at int) { dst = append(dst, at) })
	return dst
}

// NextDeadline is when the next timeout of an evaluator on the events'
// clock falls due, once a timed event has started its clock; ok is false
// on the wall clock ([Evaluator.NextTick]), before the first timed event,
// when no timeout is left, or once the run has stopped. Replay reads it to
// fire a tree's timeouts in the order they fall due.
func (e *Evaluator) NextDeadline() (at time.Time, ok bool) {
	if e.cause != nil || !e.clocked || e.clock != eventClock || e.start.IsZero() || int(e.next) >= len(e.tl().timeouts) {
		return time.Time{}, false
	}
	return e.start.Add(e.tl().timeouts[e.next]), true
}

// TickEvent fires, before ev is evaluated, the timeouts of an evaluator on
// the events' clock whose deadline ev's time is at or past, as replay of a
// single run does inside Observe; ev itself is not evaluated. It reports
// whether the run stopped (then, as on a timeout, StoppedAt is the last
// event evaluated). Replay calls it on a tree's limits with a line of
// another run of the tree. On the wall clock it does nothing: use Tick.
func (e *Evaluator) TickEvent(ev *Event) bool {
	if e.cause != nil || e.clock != eventClock {
		return false
	}
	return e.deadlineBefore(ev, time.Time{})
}

// ComparesArgs reports whether the conditions compare tool calls by their
// args (a stall check of repeated tool calls): a decoder that hashes args
// while reading them (codec.Decoder.HashArgs) then saves a second pass
// over each call's args ([Evaluator.ObserveKeyed]).
func (e *Evaluator) ComparesArgs() bool { return e.callKeys }

// ObserveKeyed is Observe for an event whose args the caller hashed
// already: argsKey is the canonical key of ev.Args when keyed, as
// codec.Decoder.ArgsKey returns it (the same 64-bit key, in the same
// process). With keyed false it is Observe.
func (e *Evaluator) ObserveKeyed(ev Event, argsKey uint64, keyed bool) (Cause, bool) {
	if e.cause != nil {
		return e.cause, true
	}
	return e.observeRefKeyed(e.copyOf(&ev), argsKey, keyed)
}
