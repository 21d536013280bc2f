package anthropicstop

import (
	"errors"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// Observe reports one message to run (see [Events]) and returns the cause
// and true when the loop must stop: on this message or earlier. The run's
// context is then already cancelled with the cause, so requests made under
// it fail; the loop should break and call run.Finish. A nil message is not
// reported.
func Observe(run *middleware.Run, m *anthropic.Message) (termination.Cause, bool) {
	return observe(run, func(emit func(termination.Event)) { Events(m, emit) })
}

// ObserveBeta is [Observe] for a message of the beta API.
func ObserveBeta(run *middleware.Run, m *anthropic.BetaMessage) (termination.Cause, bool) {
	return observe(run, func(emit func(termination.Event)) { BetaEvents(m, emit) })
}

func observe(run *middleware.Run, events func(emit func(termination.Event))) (termination.Cause, bool) {
	var (
		cause termination.Cause
		stop  bool
	)
	events(func(ev termination.Event) {
		if !stop {
			cause, stop = run.Observe(ev)
		}
	})
	if !stop {
		cause, stop = run.Cause()
	}
	return cause, stop
}

// ObserveToolResult reports the result of one tool call to run (see
// [ToolResultEvent]) and returns the cause and true when the loop must stop.
func ObserveToolResult(run *middleware.Run, call anthropic.ToolUseBlock, output string, err error) (termination.Cause, bool) {
	return run.Observe(ToolResultEvent(call, output, err))
}

// ObserveError reports a loop-level error that the loop survives (a failed
// request it retries) as an error event, so that the errors condition counts
// it, and returns the cause and true when the loop must stop. An error that
// ends the loop goes to run.Finish instead. A nil err reports nothing.
func ObserveError(run *middleware.Run, err error) (termination.Cause, bool) {
	if err == nil {
		return run.Cause()
	}
	return run.Observe(termination.Event{Kind: termination.KindError, Err: err.Error()})
}

// ObserveStream reads a streamed message to its end, passing each event to
// onEvent (if not nil) as it arrives and accumulating it with the SDK's
// Message.Accumulate, then closes the stream and reports the accumulated
// message to run like [Observe].
//
// It returns the accumulated message and: nil to go on; the stream's error
// when the stream failed (not reported to run: pass it to run.Finish, or to
// [ObserveError] and retry); or the run's typed cause (a
// [termination.Cause], which is an error) when the loop must stop. Either
// error can be handed straight to run.Finish, which keeps a cause that has
// already stopped the run.
func ObserveStream(run *middleware.Run, stream *ssestream.Stream[anthropic.MessageStreamEventUnion], onEvent func(anthropic.MessageStreamEventUnion)) (anthropic.Message, error) {
	var m anthropic.Message
	if stream == nil {
		return m, errNilStream
	}
	defer stream.Close()
	for stream.Next() {
		ev := stream.Current()
		if err := m.Accumulate(ev); err != nil {
			return m, err
		}
		if onEvent != nil {
			onEvent(ev)
		}
	}
	if err := stream.Err(); err != nil {
		if cause, stopped := run.Cause(); stopped {
			return m, cause
		}
		return m, err
	}
	if cause, stop := Observe(run, &m); stop {
		return m, cause
	}
	return m, nil
}

var errNilStream = errors.New("anthropicstop: nil stream")

var errNilIterator = errors.New("anthropicstop: nil iterator")
