package anthropicstop

import (
	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// ObserveStreamError reports a streamed turn that err cut short: the
// partial message and error that [Accumulate] returned. The turn is a
// message event, never a final one (it is not an answer), with the text
// and the tokens the partial message holds, and without its tool calls
// (the loop does not run them; their input may be cut off); then an error
// event with err's text, as [ObserveError] reports it. It returns the
// cause and true when the loop must stop. Call it in place of ObserveError
// when the loop retries, or before run.Finish(err) when it ends:
// run.Finish(err) alone does not count the partial turn's tokens.
//
// Anthropic streams the usage as it goes: message_start carries the input
// tokens (the prompt-cache tokens too, added in as [Events] adds them) and
// a provisional output count, each message_delta the output so far, so a
// turn cut short after message_start still counts its whole prompt. A
// partial message with nothing in it (the stream failed before
// message_start) reports only the error event. With a nil err it is
// [Observe]. A nil run is told nothing.
func ObserveStreamError(run *middleware.Run, partial *anthropic.Message, err error) (termination.Cause, bool) {
	if run == nil {
		return nil, false
	}
	if err == nil {
		return Observe(run, partial)
	}
	var m anthropic.Message
	if partial != nil {
		m = *partial
	}
	u := m.Usage
	t := newTurn(m.Model, m.StopReason, "", "", usage(u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens, u.OutputTokens))
	begun := m.ID != "" || len(m.Content) > 0 || t.usage != (termination.Usage{})
	return observeAll(run, cutEvents(t, m.Content, func(b *anthropic.ContentBlockUnion) block {
		return block{typ: b.Type, text: b.Text}
	}, begun, err))
}

// observeBetaCut is [ObserveStreamError] for a beta message (a turn of
// [AllStreaming]).
func observeBetaCut(run *middleware.Run, m *anthropic.BetaMessage, err error) (termination.Cause, bool) {
	t := newTurn(m.Model, m.StopReason, "", "", betaUsage(&m.Usage))
	begun := m.ID != "" || len(m.Content) > 0 || t.usage != (termination.Usage{})
	return observeAll(run, cutEvents(t, m.Content, func(b *anthropic.BetaContentBlockUnion) block {
		return block{typ: b.Type, text: b.Text}
	}, begun, err))
}

// observeAll reports evs in order until one stops the run.
func observeAll(run *middleware.Run, evs []termination.Event) (termination.Cause, bool) {
	for _, ev := range evs {
		if cause, stop := run.Observe(ev); stop {
			return cause, true
		}
	}
	return run.Cause()
}
