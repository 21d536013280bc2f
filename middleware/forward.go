package middleware

import (
	"fmt"
	"iter"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentstop/agentstop/termination"
)

// Forward wraps a channel-based loop: it returns a channel that carries the
// same items as in, in the same order, while every item's event (decode) is
// evaluated by run. It is ForwardEach for decode functions that return one
// event per item; see ForwardEach for what happens when the run stops.
//
// Read the output until it is closed. A consumer that leaves early (breaks
// out of its range loop) must call run.Leave: the run then ends promptly —
// NaturalCompletion if the last item it took carried the final answer,
// Cancelled{reason: external} otherwise — and Run.Wait returns as soon as
// the producer has closed in (at the latest after the drain timeout from
// Leave). Without Leave nothing tells the forwarder that nobody reads any
// more: the item it holds waits for the consumer, and Wait blocks, until
// the caller's context ends (a stopped run reports the wait once, after the
// drain timeout, naming Run.Leave); then, as after Leave, until the
// producer has closed in, at the latest the drain timeout later. A consumer that must be able to break
// out freely uses Range or ForwardSeq, where a break ends the run. A
// supervisor that stops the run (run.Stop) while the consumer still reads
// is not a consumer leaving: the consumer still gets every evaluated item,
// however long it is busy.
//
// A run takes one stream: Forward on a run that another path (Forward,
// ForwardEach, ForwardSeq, ForwardSeqEach, Range, RangeEach) already
// consumes, or that Finish has finished, panics with a message naming the
// run and both paths, and reads nothing from in; the forwarder finishes
// the run, so Run.Finish while it forwards panics too (see Run.Finish).
func Forward[T any](run *Run, in <-chan T, decode func(T) termination.Event) <-chan T {
	return forwardChan(run, in, decode == nil, pathForward, &forwarder[T]{run: run, decodeOne: decode, pool: poolOf[T]()})
}

// ForwardEach is Forward for decode functions that turn one item into zero
// or more events (a model response that requests tools: a message and its
// tool calls). An event with Kind 0 is skipped; any other invalid event (see
// termination.Event.Validate) ends the run with Failed{reason:
// invalid_input}.
//
// One goroutine, owned by the run, forwards the items; it exits when in is
// closed, or once the run has stopped and the rest of in has been drained
// (or the drain timeout has passed). When a condition fires on an item, that
// item is still delivered, then the output is closed and the rest of in is
// drained and counted in Result.Drained. When the run stops from outside
// (timeout timer, Stop, the caller's context), the output is closed at once,
// except that an item already evaluated is still handed over first, like a
// firing item; an item received after the stop is drained, not evaluated or
// forwarded. So a consumer that reads until the output closes receives every
// item whose events were evaluated, in order, however the run stopped:
// Result.Events counts exactly their events. The producer is drained while
// the last item waits for the consumer, so it never blocks.
//
// An evaluated item is never given up on a wall clock while the consumer
// may still read: a consumer busy for minutes (a tool call that runs a test
// suite) gets it when it comes back. Only Leave (a consumer that has left,
// see Forward) gives it up, as soon as the producer has closed in, or the
// end of the caller's context (the one given to Start), once the drain
// timeout has passed since the stop. When the drain timeout passes with
// the item not taken, the recorder is told once (telemetry's recorder
// hands it to otel.Handle), naming the stage and run and Run.Leave. The
// producer is drained while the item waits; once it has been taken,
// draining gives up after the drain timeout.
// The run is finished (Run.Wait returns) once the goroutine exits. A nil
// run, channel or decode function gives a closed channel; the run, if any,
// ends with Failed{reason: invalid_input}. A run that another path already
// consumes panics, as with Forward.
func ForwardEach[T any](run *Run, in <-chan T, decode func(item T, emit func(termination.Event))) <-chan T {
	f := newEachForwarder(run, decode)
	f.w, f.pool = nil, poolOf[T]() // the loop takes its work from the pool
	return forwardChan(run, in, decode == nil, pathForwardEach, f)
}

// forwardChan starts f's goroutine, forwarding in to the returned channel:
// the run's consumer path (consumer.go) is path.
func forwardChan[T any](run *Run, in <-chan T, nilDecode bool, path consumerPath, f *forwarder[T]) <-chan T {
	out := make(chan T)
	if run == nil {
		close(out)
		return out
	}
	run.mu.Lock()
	if err := run.claimLocked(path); err != nil {
		run.mu.Unlock()
		panic(err)
	}
	if in == nil || nilDecode {
		run.mu.Unlock()
		badInput(run, in == nil, path, "channel")
		close(out)
		return out
	}
	run.wake = make(chan struct{})
	if run.left || run.ctx.Err() != nil {
		close(run.wake)
		run.woken = true
	}
	run.mu.Unlock()
	f.in, f.out = in, out // in f rather than as the goroutine's arguments: one allocation less
	go f.loop()
	return out
}

// checkInput makes path the run's consumer path (it panics when the run
// has one: consumer.go), and ends the run with invalid_input when the
// input or the decode function is nil.
func checkInput(run *Run, nilInput, nilDecode bool, path consumerPath, what string) error {
	if run == nil {
		return errNilRun
	}
	run.claim(path)
	if !nilInput && !nilDecode {
		return nil
	}
	return badInput(run, nilInput, path, what)
}

// badInput ends the run, whose consumer path is path, with invalid_input
// for a nil input (nilInput) or decode function.
func badInput(run *Run, nilInput bool, path consumerPath, what string) error {
	err := fmt.Errorf("middleware: %s: nil decode function", path)
	if nilInput {
		err = fmt.Errorf("middleware: %s: nil input %s", path, what)
	}
	run.fail(termination.FailInvalidInput, err)
	run.finishPath()
	return err
}

type forwarder[T any] struct {
	run *Run
	// One of decode (ForwardEach, ForwardSeqEach: the decode function
	// with f.emit bound to it) and decodeOne (Forward, ForwardSeq) is set.
	decode    func(T)
	decodeOne func(T) termination.Event
	// w is the item being forwarded and its event: the channel forwarder
	// holds one only while it has an item, taken from pool (see work);
	// the others hold theirs throughout.
	w     *work[T]
	pool  *workPool[T] // channel forwarding only
	in    <-chan T
	out   chan<- T
	stop  bool // the run stopped on (or before) the current item
	seen  bool // an event of the current item was evaluated
	final bool // the last evaluated event was a final answer
	// sentFinal is final as of the last item the consumer took (channel
	// forwarding only; mirrored in Run.sentFinal).
	sentFinal bool
}

// work is what a forwarder needs only while it has an item: the item
// being forwarded, from in to out (channel forwarding only), and ev, the
// event being evaluated. decodeOne's result is stored in ev and evaluated
// in place, so the event is not copied again on its way to the evaluator
// and the recorder, and the evaluation does not run on top of the decode
// function's frames (the forwarding goroutine's stack stays small).
//
// A channel forwarder that waits for its producer holds no work: it gives
// it back to a pool shared by the forwarders of its item type, and takes
// one again when the next item comes, so that a live run waiting for its
// next event holds no copy of an item or an event (§6: a live run's
// memory). A pooled work may keep the last item and event it carried until
// it is taken again, as a forwarder kept its last item until its run
// ended.
type work[T any] struct {
	item T
	ev   termination.Event
}

// workPool is the pool of spare works for items of type T: a few, shared by
// the forwarders of that type. It keeps at most a few per processor; a
// work given back beyond that is left to the garbage collector, so that
// the spares of a burst of runs (or of forwarders that the scheduler has
// not run yet since their consumer took their item) do not outlive it. (A
// sync.Pool keeps everything given back until two collections have
// passed.)
type workPool[T any] struct {
	// last is the spare given back last, taken first without the lock:
	// a forwarder that waits between items, alone on its stage, gives
	// back and takes the same work.
	last  atomic.Pointer[work[T]]
	mu    sync.Mutex
	spare []*work[T] // the others, at most cap(spare)
}

// workPools holds the *workPool[T] of each item type T, keyed by a nil *T.
var workPools sync.Map

// sparesPerProc is how many spare works a pool keeps per processor.
const sparesPerProc = 4

// poolOf returns the pool of work for items of type T.
func poolOf[T any]() *workPool[T] {
	key := any((*T)(nil))
	if p, ok := workPools.Load(key); ok {
		return p.(*workPool[T])
	}
	p, _ := workPools.LoadOrStore(key, &workPool[T]{spare: make([]*work[T], 0, sparesPerProc*runtime.GOMAXPROCS(0))})
	return p.(*workPool[T])
}

// get returns a spare work, or a new one.
func (p *workPool[T]) get() *work[T] {
	if w := p.last.Swap(nil); w != nil {
		return w
	}
	p.mu.Lock()
	if n := len(p.spare); n > 0 {
		w := p.spare[n-1]
		p.spare[n-1] = nil
		p.spare = p.spare[:n-1]
		p.mu.Unlock()
		return w
	}
	p.mu.Unlock()
	return new(work[T])
}

// put keeps w as a spare, unless the pool has enough.
func (p *workPool[T]) put(w *work[T]) {
	if p.last.CompareAndSwap(nil, w) {
		return
	}
	p.mu.Lock()
	if len(p.spare) < cap(p.spare) {
		p.spare = append(p.spare, w)
	}
	p.mu.Unlock()
}

// take makes f hold a work from its pool.
func (f *forwarder[T]) take() {
	f.w = f.pool.get()
}

// slot is where a received item goes: f's work's item, taking a work if
// f holds none.
func (f *forwarder[T]) slot() *T {
	if f.w == nil {
		if w := f.pool.last.Swap(nil); w != nil {
			f.w = w
		} else {
			f.take()
		}
	}
	return &f.w.item
}

// giveBack returns f's work to its pool (clear: emptied first, when the
// forwarder is done with it).
func (f *forwarder[T]) giveBack(clear bool) {
	if w := f.w; w != nil {
		if clear {
			*w = work[T]{}
		}
		f.w = nil
		f.pool.put(w)
	}
}

// newEachForwarder is the forwarder of ForwardEach and ForwardSeqEach.
func newEachForwarder[T any](run *Run, decode func(T, func(termination.Event))) *forwarder[T] {
	f := &forwarder[T]{run: run, w: new(work[T])}
	if decode != nil {
		emit := f.emit // bound once rather than per item
		f.decode = func(item T) { decode(item, emit) }
	}
	return f
}

// What became of one item.
const (
	itemGoes  = iota // evaluated (or no event), the run goes on: forward it
	itemFired        // evaluated, and the run stopped on it: forward it, then end
	itemLate         // the run had stopped before it: not evaluated, not forwarded
)

// emit is the emit function of ForwardEach's decode functions.
func (f *forwarder[T]) emit(ev termination.Event) {
	if ev.Kind == 0 || f.stop {
		return
	}
	f.w.ev = ev
	f.emitRef(&f.w.ev)
}

// emitRef evaluates one event of the current item, in place.
func (f *forwarder[T]) emitRef(ev *termination.Event) {
	if ev.Kind == 0 || f.stop {
		return
	}
	f.run.mu.Lock()
	_, stop, late := f.run.observeLocked(ev)
	f.stop = stop
	if !late {
		f.seen = true
		f.final = ev.Kind == termination.KindFinal
	}
}

// observe evaluates one item's events, turning a decode panic into
// Failed{panic} (the item then counts as firing).
func (f *forwarder[T]) observe(item *T) int {
	if f.decodeOne != nil && !f.decodeInto(item) {
		return itemFired
	}
	return f.evaluate(item)
}

// evaluate is observe once decodeOne's event is in f.w.ev (decodeInto):
// the channel forwarder's loop decodes first, in a frame of its own right
// above the loop's (see decodeInto), then evaluates.
func (f *forwarder[T]) evaluate(item *T) int {
	f.stop, f.seen = false, false
	if f.decodeOne != nil {
		// emitRef, by hand: one frame less under the evaluation.
		if ev := &f.w.ev; ev.Kind != 0 {
			f.run.mu.Lock()
			_, stop, late := f.run.observeLocked(ev)
			f.stop = stop
			if !late {
				f.seen = true
				f.final = ev.Kind == termination.KindFinal
			}
		}
	} else if !f.decodeEach(item) {
		return itemFired
	}
	switch {
	case !f.stop:
		return itemGoes
	case f.seen:
		return itemFired
	}
	return itemLate
}

// decodeInto decodes item into f.w.ev; false if decodeOne panicked. Calling
// a function that takes and returns values as large as an Event costs
// about four copies of them in the caller's frame: this is the largest
// frame of the forwarding goroutine, so nothing else runs on top of it,
// and the loop calls it directly, so that it lies right above the loop's
// frame (the goroutine's stack then stays in its first 2 KiB).
func (f *forwarder[T]) decodeInto(item *T) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			f.panicked(p)
			ok = false
		}
	}()
	f.w.ev = f.decodeOne(*item)
	return true
}

// decodeEach decodes item, evaluating each event as it is emitted; false
// if decode panicked.
func (f *forwarder[T]) decodeEach(item *T) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			f.panicked(p)
			ok = false
		}
	}()
	f.decode(*item)
	return true
}

func (f *forwarder[T]) panicked(p any) {
	err := fmt.Errorf("middleware: stage %q: decode panicked: %v", f.run.stage.name, p)
	f.run.report(err)
	f.run.fail(termination.FailPanic, err)
}

// loop forwards in to out. The item lives in f's work, and the work of
// each step is in small functions called one after the other, with few
// arguments, so that the goroutine's stack stays in its first 2 KiB: a
// frame that holds a T (a select that receives or sends one holds a copy
// of it) or a Result is never below the evaluation or the decode, and
// loop's own frame is small (the runtime's allocation of a select's
// waiting records, under a blocking select's frames, comes within a few
// bytes of the 2 KiB). tryReceive is given the channel and where the item
// goes, so that its select's frame holds one copy of the item, not two.
func (f *forwarder[T]) loop() {
	f.take()
	for {
		got := f.tryReceive(f.in, f.slot())
		if got == recvWait {
			f.giveBack(false) // nothing to hold while waiting
			got = f.receive(f.in)
		}
		switch got {
		case recvClosed:
			close(f.out)
			f.finish()
			return
		case recvStopped:
			f.endDrained()
			return
		}
		what := itemFired // a decode that panicked fires
		if f.decodeOne == nil || f.decodeWork() {
			what = f.evaluateWork()
		}
		switch what {
		case itemLate:
			// Stopped from outside before this item: it is drained.
			f.endDrained()
			return
		case itemFired:
			f.endHanding()
			return
		}
		// An item that changes whether the consumer has had the final
		// answer is flagged while it is handed over, for Leave. (The
		// hand-over changes neither final nor sentFinal.)
		if f.final != f.sentFinal {
			f.run.inFlight.Store(true)
		}
		if !f.tryHand() && !f.hand() {
			return
		}
		if f.final != f.sentFinal {
			f.sent()
		}
	}
}

// decodeWork, evaluateWork, endDrained and endHanding are decodeInto,
// evaluate and end for the item in f's work, called with nothing but f.

func (f *forwarder[T]) decodeWork() bool { return f.decodeInto(&f.w.item) }

func (f *forwarder[T]) evaluateWork() int { return f.evaluate(&f.w.item) }

// endDrained is end with no item to hand over.
//
//go:noinline
func (f *forwarder[T]) endDrained() { f.end(false) }

// endHanding is end handing over the item in f's work.
//
//go:noinline
func (f *forwarder[T]) endHanding() { f.end(true) }

// What the forwarder's receive found.
const (
	recvItem    = iota // an item
	recvClosed         // in was closed
	recvStopped        // the run has stopped, or the consumer has left (Leave)
	recvWait           // nothing yet (tryReceive only)
)

// tryReceive takes the next item from in into f's work if one is ready. Each
// channel operation first tries without blocking: on a busy stream that is
// all it takes, and a one-case select is much cheaper than a blocking one.
// An outside stop is still seen at once: by observe on the next item, or by
// the blocking selects when idle.
//
//go:noinline
func (f *forwarder[T]) tryReceive(in <-chan T, dst *T) int {
	if f.run.leftFlag.Load() {
		// Leave was called while items kept flowing.
		f.left()
		return recvStopped
	}
	select {
	case v, ok := <-in:
		if !ok {
			return recvClosed
		}
		*dst = v
		return recvItem
	default:
		return recvWait
	}
}

// receive waits for the next item from in, or the run's stop, holding no
// work; it takes one for the item it receives.
func (f *forwarder[T]) receive(in <-chan T) int {
	run := f.run
	select {
	case v, ok := <-in:
		if !ok {
			return recvClosed
		}
		*f.slot() = v
		return recvItem
	case <-run.wake:
		if run.leftFlag.Load() {
			f.left()
		}
		return recvStopped
	}
}

// tryHand gives the evaluated item to the consumer if it is waiting.
//
//go:noinline
func (f *forwarder[T]) tryHand() bool {
	select {
	case f.out <- f.w.item:
		return true
	default:
		return false
	}
}

// hand waits for the consumer to take the evaluated item. If the run stops
// first, it ends the run (the item is still handed over, as a firing item
// would be) and returns false.
func (f *forwarder[T]) hand() bool {
	select {
	case f.out <- f.w.item:
		return true
	case <-f.run.wake:
		f.handStopped()
		return false
	}
}

// handStopped ends the run when it stopped, or the consumer left, while
// the item waited for the consumer (a function of its own keeps hand's
// frame, under the select's, small).
func (f *forwarder[T]) handStopped() {
	if run := f.run; run.leftFlag.Load() {
		// The consumer has left without this item.
		f.left()
	} else {
		// Stopped from outside while the consumer was busy: the item was
		// evaluated, so it is still handed over, as a firing item would
		// be.
		run.inFlight.Store(false)
	}
	f.end(true)
}

// finish gives f's work back and finishes the run at the end of its
// stream (in a frame of its own: Finish returns a Result).
//
//go:noinline
func (f *forwarder[T]) finish() {
	f.giveBack(true)
	f.run.finishPath()
}

// sent records that the consumer took an item that changed sentFinal.
func (f *forwarder[T]) sent() {
	f.sentFinal = f.final
	f.run.sentFinal.Store(f.final)
	f.run.inFlight.Store(false)
}

// left ends the run after Leave, by what the consumer took.
func (f *forwarder[T]) left() {
	f.run.inFlight.Store(false)
	f.run.stopLeaving(f.sentFinal, f.run.leaveReason())
}

// end finishes a stopped run. It hands the last evaluated item (f's work's,
// when pending) to the consumer, then closes the output, while it drains in so that the
// producer never blocks, and finishes the run once both are done.
//
// The item is never given up on a wall clock while the consumer may still
// read: it waits until the consumer takes it, until Leave (then it is given
// up once the producer has closed in, at the latest after the drain timeout
// from Leave), or until the caller's context (the one given to Start) has
// ended and the drain timeout has passed. When the drain timeout passes
// with the item still waiting, that is reported once (a consumer that broke
// out of its range loop without Leave would hang Run.Wait). Draining goes
// on while the item waits, and gives up after the drain timeout otherwise.
func (f *forwarder[T]) end(pending bool) {
	run, in, out := f.run, f.in, f.out
	drain := run.stage.cfg.drainTimeout
	e := ending[T]{run: run, out: out, recv: in, t: time.NewTimer(drain)}
	defer e.t.Stop()
	if pending {
		e.item, e.send = f.w.item, out
		e.leave, e.left = run.leaveChan()
	} else {
		close(out)
	}
	for e.send != nil || e.recv != nil {
		select {
		case e.send <- e.item:
			e.handed()
		case _, ok := <-e.recv:
			if ok {
				e.n++
				continue
			}
			e.recv = nil
			if e.left && e.send != nil {
				e.giveUp()
			}
		case <-e.leave:
			e.leave, e.left = nil, true
			if e.recv == nil {
				e.giveUp()
			} else {
				// Wait returns within the drain timeout of Leave.
				e.late = false
				e.t.Reset(drain)
			}
		case <-e.gone:
			e.giveUp()
			e.stopDraining()
		case <-e.t.C:
			e.expired()
		}
	}
	run.addDrained(e.n)
	f.finish()
}

// ending is the state of forwarder.end: the last item waiting for the
// consumer (send, nil once taken or given up) and the producer being
// drained (recv, nil once closed or given up).
type ending[T any] struct {
	run   *Run
	out   chan<- T
	item  T // the select reads it even while send is nil
	send  chan<- T
	recv  <-chan T
	n     int             // items drained
	leave <-chan struct{} // closed by Leave, watched while the item waits
	left  bool            // Leave was called
	// gone is the caller's context's Done, watched once the drain timeout
	// has passed with the item waiting: its end gives the item up.
	gone <-chan struct{}
	late bool // the drain timeout has passed
	t    *time.Timer
}

// handed: the consumer took the item.
func (e *ending[T]) handed() {
	e.send, e.leave, e.gone = nil, nil, nil
	close(e.out)
	if e.late {
		e.stopDraining()
	}
}

// giveUp gives the waiting item up and closes the output.
func (e *ending[T]) giveUp() {
	e.send, e.leave, e.gone = nil, nil, nil
	close(e.out)
}

// stopDraining gives up draining a producer that is still sending.
func (e *ending[T]) stopDraining() {
	if e.recv == nil {
		return
	}
	e.recv = nil
	e.run.report(fmt.Errorf("middleware: stage %q run %s: producer still sending after %s of draining; giving up",
		e.run.stage.name, e.run.id, e.run.stage.cfg.drainTimeout))
}

// expired: the drain timeout has passed (since the stop, or since Leave).
func (e *ending[T]) expired() {
	e.late = true
	run := e.run
	switch {
	case e.send == nil:
	case e.left:
		// After Leave nobody is expected to take it.
		e.giveUp()
	case run.parentErr() != nil:
		run.report(fmt.Errorf("middleware: stage %q run %s: the consumer did not take the last item within %s of the stop and the caller's context has ended: item given up (a consumer that breaks out of its range loop must call Run.Leave)",
			run.stage.name, run.id, run.stage.cfg.drainTimeout))
		e.giveUp()
	default:
		run.report(fmt.Errorf("middleware: stage %q run %s: the consumer has not taken the last item within %s of the stop; it is kept until the consumer takes it, and Run.Wait waits: a consumer that breaks out of its range loop must call Run.Leave",
			run.stage.name, run.id, run.stage.cfg.drainTimeout))
		e.gone = run.parentDone()
	}
	if e.send == nil {
		e.stopDraining()
	}
}

// ForwardSeq wraps an iterator-based loop: the returned iterator yields the
// same pairs as seq, in the same order, while every item's event (decode) is
// evaluated by run. It is ForwardSeqEach for decode functions that return
// one event per item. A run takes one stream: see ForwardSeqEach.
func ForwardSeq[T any](run *Run, seq iter.Seq2[T, error], decode func(T) termination.Event) iter.Seq2[T, error] {
	return forwardSeq(run, seq, decode == nil, pathForwardSeq, func() *forwarder[T] { return &forwarder[T]{run: run, decodeOne: decode, w: new(work[T])} })
}

// ForwardSeqEach is ForwardSeq for decode functions that turn one item into
// zero or more events.
//
// The iteration runs inline in the consumer's goroutine. A pair with a
// non-nil error is forwarded as is and evaluated as an error event (not
// decoded); a stream whose last pair is an error ends with
// Failed{reason: stream_error}. When a condition fires, the item that fired
// it is yielded, then iteration ends (seq's yield returns false). When the
// run stops from outside (timeout timer, Stop, the caller's context), the
// run's context is cancelled and iteration ends at the next item, which is
// not yielded (it counts as drained); a seq that honours the context
// returns promptly. A consumer that breaks out of the
// loop early stops the run with Cancelled{reason: external}, unless it breaks
// on a pair with an error or right after the final answer: then the run ends
// as if the stream had ended there (Failed{reason: stream_error},
// NaturalCompletion). The run is finished (Run.Wait returns) when the
// iteration ends, so a consumer that breaks out has nothing more to do
// (a Stop after the break changes nothing). A nil run, seq or
// decode function yields nothing; the run, if any, ends with
// Failed{reason: invalid_input}.
//
// A run takes one stream, and the iterator is ranged once: ranging it on
// a run that another path (Forward, Range, ..., or this iterator in an
// earlier range statement) already consumes, or that Finish has finished,
// panics with a message naming the run and both paths, before seq is
// called. Run.Finish from the loop body (or elsewhere while the iteration
// runs) panics too: break out of the loop instead.
func ForwardSeqEach[T any](run *Run, seq iter.Seq2[T, error], decode func(item T, emit func(termination.Event))) iter.Seq2[T, error] {
	return forwardSeq(run, seq, decode == nil, pathForwardSeqEach, func() *forwarder[T] {
		return newEachForwarder(run, decode)
	})
}

// forwardSeq is ForwardSeq and ForwardSeqEach (path): newForwarder makes
// the forwarder of one iteration.
func forwardSeq[T any](run *Run, seq iter.Seq2[T, error], nilDecode bool, path consumerPath, newForwarder func() *forwarder[T]) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		if checkInput(run, seq == nil, nilDecode, path, "iterator") != nil {
			return
		}
		f := newForwarder()
		var (
			consumerLeft bool
			panicked     any
		)
		func() {
			defer func() { panicked = recover() }()
			for item, err := range seq {
				what := itemGoes
				if err != nil {
					if _, stop, late := run.observe(&termination.Event{Kind: termination.KindError, Err: err.Error()}); late {
						what = itemLate
					} else if stop {
						what = itemFired
					}
				} else {
					what = f.observe(&item)
				}
				if what == itemLate {
					// Stopped from outside before this item: it is drained.
					return
				}
				if !yield(item, err) {
					// Breaking out on an error pair is how loops end on a
					// stream error, and breaking out after the final answer
					// is how they end on it: the evaluated events decide the
					// end (Failed{stream_error}, NaturalCompletion). Any
					// other break is the consumer leaving.
					consumerLeft = err == nil && !f.final
					return
				}
				if what == itemFired {
					return
				}
				select {
				case <-run.ctx.Done():
					return
				default:
				}
			}
		}()
		if panicked != nil {
			// A panic from the consumer's own loop body or from seq is theirs:
			// end the run, then let it continue.
			run.fail(termination.FailPanic, fmt.Errorf("middleware: stage %q: panic during iteration: %v", run.stage.name, panicked))
			run.finishPath()
			panic(panicked)
		}
		if consumerLeft {
			run.stopWith(termination.Cancelled{Reason: termination.CancelExternal, Detail: "consumer stopped iterating"})
		}
		run.finishPath()
	}
}
