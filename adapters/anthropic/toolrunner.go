package anthropicstop

import (
	"context"
	"encoding/json"
	"iter"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// All wraps the iterator of the SDK's beta tool runner (runner.All(ctx),
// with the ctx that stage.Start returned): it yields the same messages,
// reports each one to run (see [BetaEvents]) and ends the iteration when
// the run stops, so the runner makes no further request and runs no
// further tool. The run is finished when the iteration ends; read the
// result with run.Wait.
//
// Once the run has stopped, the runner's own error for the request it can
// no longer make (its context is cancelled) is not yielded: the run's
// cause, from run.Wait or context.Cause, says why the loop ended. Wrap the
// runner's tools with [Tools] to report tool results too.
func All(run *middleware.Run, seq iter.Seq2[*anthropic.BetaMessage, error]) iter.Seq2[*anthropic.BetaMessage, error] {
	calls := callsFor(run, false)
	if calls == nil {
		return middleware.ForwardSeqEach(run, quiet(run, seq), BetaEvents)
	}
	return middleware.ForwardSeqEach(run, quiet(run, seq), func(m *anthropic.BetaMessage, emit func(termination.Event)) {
		calls.record(m) // before the runner runs m's tools: it does so when asked for the next message
		BetaEvents(m, emit)
	})
}

// quiet drops the errors a sequence yields once run has stopped: they are
// the consequence of the stop (a cancelled context), not a failure.
func quiet[T any](run *middleware.Run, seq iter.Seq2[T, error]) iter.Seq2[T, error] {
	if seq == nil {
		return nil
	}
	return func(yield func(T, error) bool) {
		for item, err := range seq {
			if err != nil {
				if _, stopped := run.Cause(); stopped {
					return
				}
			}
			if !yield(item, err) {
				return
			}
		}
	}
}

// StreamEvents is what the streaming tool runner yields per turn.
type StreamEvents = iter.Seq2[anthropic.BetaRawMessageStreamEventUnion, error]

// AllStreaming wraps the iterator of the SDK's streaming beta tool runner
// (runner.AllStreaming(ctx), with the ctx that stage.Start returned) like
// [All]: every turn's events are yielded unchanged, the turn's message is
// accumulated and reported to run when its message_stop event arrives (just
// before that event is yielded), and the iteration (the turn's and the runner's) ends when the
// run stops. A turn that fails midway is reported as [ObserveStreamError]
// reports one: a message event with what arrived and the tokens it
// reported, then the error. A turn that the consumer leaves before its end
// is not reported. A consumer that leaves the iteration early stops the run with
// Cancelled{reason: external}, unless it leaves on a pair with an error (of
// a turn or of the runner) or right after the final answer: then the run
// ends as the stream would have ended there (Failed{reason: stream_error},
// NaturalCompletion), as with [All]. The run is finished when the outer
// iteration ends.
func AllStreaming(run *middleware.Run, turns iter.Seq2[StreamEvents, error]) iter.Seq2[StreamEvents, error] {
	return func(yield func(StreamEvents, error) bool) {
		if run == nil {
			return
		}
		if turns == nil {
			// Misuse, as middleware.ForwardSeqEach reports it: invalid_input.
			run.Finish(termination.Failed{Reason: termination.FailInvalidInput, Err: errNilIterator.Error()})
			return
		}
		// last is what the consumer saw last: an error pair, or the
		// message_stop of a final answer. It decides how an early exit ends.
		var last streamEnd
		left := false
		func() {
			for events, err := range quiet(run, turns) {
				if err != nil {
					run.Observe(termination.Event{Kind: termination.KindError, Err: err.Error()})
				}
				last = streamEnd{err: err != nil}
				if !yield(turnEvents(run, events, &last), err) {
					left = true
					return
				}
				if stopped(run) {
					return
				}
			}
		}()
		if left && !last.err && !last.final && !stopped(run) {
			run.Leave("consumer stopped iterating")
		}
		run.Finish(nil)
	}
}

// streamEnd is the last pair a consumer of [AllStreaming] saw.
type streamEnd struct {
	err   bool // a pair with an error
	final bool // the message_stop of a turn reported as the final answer
}

func stopped(run *middleware.Run) bool {
	select {
	case <-run.Done():
		return true
	default:
		return false
	}
}

// turnEvents wraps the events of one streamed turn, recording in last what
// the consumer was handed last.
func turnEvents(run *middleware.Run, events StreamEvents, last *streamEnd) StreamEvents {
	if events == nil {
		return nil
	}
	return func(yield func(anthropic.BetaRawMessageStreamEventUnion, error) bool) {
		var m anthropic.BetaMessage
		reported := false // the turn's message_stop was reported
		for ev, err := range quiet(run, events) {
			if err != nil {
				if reported {
					run.Observe(termination.Event{Kind: termination.KindError, Err: err.Error()})
				} else {
					// The turn so far, with the tokens it spent, then the error.
					observeBetaCut(run, &m, err)
				}
			} else if aerr := m.Accumulate(ev); aerr != nil {
				// The runner fails the turn with this error too.
				err = aerr
			}
			final := false
			var stop bool
			if err == nil && ev.Type == "message_stop" {
				// Reported before the consumer sees message_stop, so that
				// leaving right after it is known to be leaving after the
				// final answer; the stop still takes effect after the yield.
				_, stop, final = observeTurn(run, &m)
				reported = true
			}
			*last = streamEnd{err: err != nil, final: final}
			if !yield(ev, err) || stop || stopped(run) {
				return
			}
		}
	}
}

// observeTurn is [ObserveBeta] that also reports whether the message was
// the final answer.
func observeTurn(run *middleware.Run, m *anthropic.BetaMessage) (cause termination.Cause, stop, final bool) {
	// The runner runs the turn's tools when the next turn starts.
	callsFor(run, false).record(m)
	cause, stop = middleware.ObserveEach(run, m, func(m *anthropic.BetaMessage, emit func(termination.Event)) {
		BetaEvents(m, func(ev termination.Event) {
			final = ev.Kind == termination.KindFinal
			emit(ev)
		})
	})
	return cause, stop, final
}

// Tools wraps the tools of a beta tool runner so that every run of one is
// reported to run as a tool_result event (with Err set when it failed),
// once it has returned. The runner runs the tools of one turn in parallel;
// their results are reported in the order they finish. A nil tool stays
// nil; with a nil run the tools report nothing.
//
// The runner does not tell a tool which tool_use block it answers; when the
// runner's iterator is wrapped with [All] or [AllStreaming] (with the same
// run), each result carries the id of the block it answers as its call id:
// the first block of the last reported message, not answered yet, with the
// tool's name and the input the tool was given (so parallel calls of one
// tool each get their own id). Without them, or when no block matches, the
// result has no call id.
func Tools(run *middleware.Run, tools ...anthropic.BetaTool) []anthropic.BetaTool {
	var calls *openCalls
	if run != nil {
		calls = callsFor(run, true)
	}
	out := make([]anthropic.BetaTool, len(tools))
	for i, t := range tools {
		if t != nil {
			out[i] = observedTool{BetaTool: t, run: run, calls: calls}
		}
	}
	return out
}

type observedTool struct {
	anthropic.BetaTool
	run   *middleware.Run
	calls *openCalls
}

func (t observedTool) Execute(ctx context.Context, input json.RawMessage) ([]anthropic.BetaToolResultBlockParamContentUnion, error) {
	// The call is taken before the tool runs, so that calls of one tool
	// running in parallel with the same input get their ids in turn.
	name := t.Name()
	id := t.calls.take(name, input)
	out, err := t.BetaTool.Execute(ctx, input)
	ev := termination.Event{Kind: termination.KindToolResult, Tool: name, Text: resultText(out), CallID: id}
	if err != nil {
		ev.Err = err.Error()
	}
	if t.run != nil {
		t.run.Observe(ev)
	}
	return out, err
}

func resultText(out []anthropic.BetaToolResultBlockParamContentUnion) string {
	var b strings.Builder
	for _, c := range out {
		if c.OfText != nil {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(c.OfText.Text)
		}
	}
	return b.String()
}
