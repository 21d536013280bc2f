package eino

import (
	"fmt"
	"io"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/schema"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// Forward returns an iterator that yields the same agent events as in, in
// the same order, and feeds each to run (see [Decode] for the mapping).
//
// Run the agent under [Context] of the context that middleware.Stage.Start
// returned:
//
//	ctx, run := stage.Start(ctx)
//	ctx = eino.Context(ctx, run)
//	events := eino.Forward(run, runner.Query(ctx, "task"))
//
// Then the stop is exact: every model and tool call of the agent waits
// until Forward has evaluated the events of the steps before it, so when a
// condition fires the agent's next model or tool call starts with the run's
// context already cancelled, with the typed cause (eino's graph also checks
// its context before every step). The event that fired is still yielded,
// then the returned iterator ends, and the rest of in is drained in the
// background — message streams of drained events are closed — until the
// framework closes it. The run is finished when in ends; run.Wait returns
// its result.
//
// Without [Context] the stop is best-effort: an eino agent does not wait
// for its iterator to be read, so it may start its next model call (with a
// live context) before Forward has evaluated the event that stops it; with
// a model that answers instantly it can run several steps ahead.
//
// Leaving early: an eino agent does not know whether its iterator is read,
// so a caller that stops reading before the iterator ends must call
// run.Stop (the run ends with Cancelled{reason: external}); under [Context]
// the agent then makes no further model or tool call with a live context,
// and the run finishes once the framework has closed in. A caller that
// stops after the final answer needs nothing: the agent ends on its own
// and the run ends with NaturalCompletion.
//
// Streaming message outputs are teed, never drained: the yielded event
// carries a copy of the stream for the consumer to read as usual, and
// Forward reads its own copy, so the consumer still sees chunks as they
// arrive. The events of a streamed message are observed when its stream
// ends, before the next agent event is yielded.
//
// When the agent ends with adk.ErrExceedMaxIterations (ChatModelAgent's own
// MaxIterations), the run is finished with an error that matches
// [ErrMaxIterations] and adk.ErrExceedMaxIterations.
func Forward(run *middleware.Run, in *adk.AsyncIterator[*adk.AgentEvent], opts ...Option) *adk.AsyncIterator[*adk.AgentEvent] {
	out, gen := adk.NewAsyncIteratorPair[*adk.AgentEvent]()
	if run == nil || in == nil {
		gen.Send(&adk.AgentEvent{Err: fmt.Errorf("eino: Forward needs a run and an iterator")})
		gen.Close()
		if run != nil {
			// Misuse, as middleware.Forward reports it: invalid_input.
			run.Finish(termination.Failed{Reason: termination.FailInvalidInput, Err: "eino: Forward: nil iterator"})
		}
		return out
	}
	f := &forwarder{cfg: newConfig(opts), run: run, in: in, gen: gen, live: true, gate: gateOf(run, false)}
	if f.gate != nil {
		f.gate.attach()
	}
	go f.pump()
	return out
}

// forwarder is the goroutine behind Forward. It owns gen and ends when in
// ends.
type forwarder struct {
	cfg  *config
	run  *middleware.Run
	in   *adk.AsyncIterator[*adk.AgentEvent]
	gen  *adk.AsyncGenerator[*adk.AgentEvent]
	live bool  // still yielding; false once the run stopped
	gate *gate // the run's gate when the agent runs under Context, else nil

	stop    bool  // a condition fired on the current agent event
	lastErr error // Err of the last agent event, if it carried one
	turns   int64 // model responses seen
}

func (f *forwarder) pump() {
	if f.gate != nil {
		defer f.gate.end()
	}
	defer func() {
		if p := recover(); p != nil {
			if f.live {
				f.gen.Close()
			}
			f.run.Finish(fmt.Errorf("eino: Forward panicked: %v", p))
			f.drain()
		}
	}()
	for f.live {
		ev, ok := f.next()
		if !ok {
			f.gen.Close()
			f.run.Finish(frameworkLimit(f.lastErr, f.turns))
			return
		}
		if f.stopped() {
			// Stopped from outside while the agent was working (timeout,
			// Stop, the caller's context): what follows is the
			// framework's echo of the cancellation, not the agent's work.
			f.live = false
			f.gen.Close()
			closeStream(ev)
			continue
		}
		f.forward(ev)
	}
	f.drain()
	f.run.Finish(frameworkLimit(f.lastErr, f.turns))
}

// forward yields one agent event and observes its events.
func (f *forwarder) forward(ev *adk.AgentEvent) {
	if ev == nil {
		f.gen.Send(ev)
		return
	}
	f.lastErr = ev.Err
	var mv *adk.MessageVariant
	if ev.Output != nil {
		mv = ev.Output.MessageOutput
	}
	if mv == nil || !mv.IsStreaming || mv.MessageStream == nil {
		var msg *schema.Message
		if mv != nil {
			msg = mv.Message
		}
		f.countTurn(mv, msg)
		f.cfg.decode(ev, mv, msg, f.observe)
		f.stepEvaluated(mv, msg)
		f.gen.Send(ev)
		f.afterYield()
		return
	}
	// A streamed message: the consumer gets one copy, at once; this
	// goroutine reads the other to its end.
	copies := mv.MessageStream.Copy(2)
	copies[0].SetAutomaticClose()
	mv.MessageStream = copies[0]
	f.gen.Send(ev)
	msg := concat(copies[1])
	f.countTurn(mv, msg)
	f.cfg.decode(ev, mv, msg, f.observe)
	f.stepEvaluated(mv, msg)
	f.afterYield()
}

// next reads the agent's next event, telling the gate that Forward is
// idle meanwhile.
func (f *forwarder) next() (*adk.AgentEvent, bool) {
	if f.gate == nil {
		return f.in.Next()
	}
	f.gate.setIdle(true)
	ev, ok := f.in.Next()
	f.gate.setIdle(false)
	return ev, ok
}

// stepEvaluated tells the gate that the events of one model response or
// tool result have been evaluated: the agent's next step may start.
func (f *forwarder) stepEvaluated(mv *adk.MessageVariant, msg *schema.Message) {
	if f.gate == nil || mv == nil {
		return
	}
	role := mv.Role
	if role == "" && msg != nil {
		role = msg.Role
	}
	f.gate.evaluated(role == schema.Assistant, role == schema.Tool)
}

func (f *forwarder) countTurn(mv *adk.MessageVariant, msg *schema.Message) {
	if mv != nil && msg != nil && mv.Role != schema.Tool && msg.Role != schema.Tool {
		f.turns++
	}
}

func (f *forwarder) observe(ev termination.Event) {
	if _, stop := f.run.Observe(ev); stop {
		f.stop = true
	}
}

// afterYield ends the output once the run has stopped: on an event of this
// agent event, or from outside (timeout, Stop, the caller's context).
func (f *forwarder) afterYield() {
	if !f.stop && !f.stopped() {
		return
	}
	f.live = false
	f.gen.Close()
}

// stopped reports whether the run has stopped. The run's context is
// cancelled as it stops, so it is checked too: the framework may already be
// reacting to the cancellation.
func (f *forwarder) stopped() bool {
	select {
	case <-f.run.Done():
		return true
	default:
		return f.run.Context().Err() != nil
	}
}

// drain discards the rest of in after the stop, closing message streams so
// that no producer is left blocked, until the framework closes in (it does
// once it sees the cancelled context).
func (f *forwarder) drain() {
	for {
		ev, ok := f.in.Next()
		if !ok {
			return
		}
		closeStream(ev)
	}
}

func closeStream(ev *adk.AgentEvent) {
	if ev != nil && ev.Output != nil && ev.Output.MessageOutput != nil && ev.Output.MessageOutput.MessageStream != nil {
		ev.Output.MessageOutput.MessageStream.Close()
	}
}

// concat reads a teed message stream to its end and closes it. A stream
// that fails yields what arrived before the failure (the framework reports
// the error in its own event); a stream with no message yields nil.
func concat(sr *schema.StreamReader[*schema.Message]) *schema.Message {
	defer sr.Close()
	var chunks []*schema.Message
	for {
		m, err := sr.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			break
		}
		if m != nil {
			chunks = append(chunks, m)
		}
	}
	return concatChunks(chunks)
}

// concatChunks joins the chunks of one streamed message (nil when there
// are none or they do not join). schema.ConcatMessages keeps the largest
// prompt, completion and total token counts of the chunks but drops their
// reasoning tokens; the largest of those is put back, so that a streamed
// response's usage is that of the same response delivered whole.
func concatChunks(chunks []*schema.Message) *schema.Message {
	switch len(chunks) {
	case 0:
		return nil
	case 1:
		return chunks[0]
	}
	msg, err := schema.ConcatMessages(chunks)
	if err != nil {
		return nil
	}
	reasoning := 0
	for _, c := range chunks {
		if c.ResponseMeta != nil && c.ResponseMeta.Usage != nil {
			reasoning = max(reasoning, c.ResponseMeta.Usage.CompletionTokensDetails.ReasoningTokens)
		}
	}
	if reasoning > 0 && msg.ResponseMeta != nil && msg.ResponseMeta.Usage != nil {
		// A fresh TokenUsage of ConcatMessages: no chunk shares it.
		msg.ResponseMeta.Usage.CompletionTokensDetails.ReasoningTokens = reasoning
	}
	return msg
}
