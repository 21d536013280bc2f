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
// reported. Every Observe function of this package returns this shape.
func Observe(run *middleware.Run, m *anthropic.Message) (termination.Cause, bool) {
	return middleware.ObserveEach(run, m, Events)
}

// ObserveBeta is [Observe] for a message of the beta API.
func ObserveBeta(run *middleware.Run, m *anthropic.BetaMessage) (termination.Cause, bool) {
	return middleware.ObserveEach(run, m, BetaEvents)
}

// ObserveToolResult reports the result of one tool call to run (see
// [ToolResultEvent]) and returns the cause and true when the loop must stop.
// A nil run is told nothing.
func ObserveToolResult(run *middleware.Run, call anthropic.ToolUseBlock, output string, err error) (termination.Cause, bool) {
	if run == nil {
		return nil, false
	}
	return run.Observe(ToolResultEvent(call, output, err))
}

// ObserveError reports a loop-level error that the loop survives (a failed
// request it retries) as an error event, so that the errors condition counts
// it, and returns the cause and true when the loop must stop; see
// Run.ObserveError. An error that ends the loop goes to run.Finish
// instead.
func ObserveError(run *middleware.Run, err error) (termination.Cause, bool) {
	return run.ObserveError(err)
}

// Accumulate reads a streamed message to its end, passing each event to
// onEvent (if not nil) as it arrives and accumulating it with the SDK's
// Message.Accumulate, closes the stream, and returns the accumulated
// message with the stream's error. Report the message with [Observe], like
// one that was not streamed. With an error, the message is what arrived
// before it: report it with [ObserveStreamError] (its tokens were spent),
// then hand the error to run.Finish (which keeps the run's cause when the
// stream failed because the run stopped) or retry.
func Accumulate(stream *ssestream.Stream[anthropic.MessageStreamEventUnion], onEvent func(anthropic.MessageStreamEventUnion)) (anthropic.Message, error) {
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
	return m, stream.Err()
}

var errNilStream = errors.New("anthropicstop: nil stream")

var errNilIterator = errors.New("anthropicstop: nil iterator")
