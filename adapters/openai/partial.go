package openaistop

import (
	"github.com/openai/openai-go/v3"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// ObserveStreamError reports a streamed turn that err cut short: the
// partial completion and error that [Accumulate] returned. The turn is a
// message event, never a final one (it is not an answer), with the text
// and the tokens the partial completion holds, and without its tool calls
// (the loop does not run them; their arguments may be cut off); then an
// error event with err's text, as [ObserveError] reports it. It returns
// the cause and true when the loop must stop. Call it in place of
// ObserveError when the loop retries, or before run.Finish(err) when it
// ends: run.Finish(err) alone does not count the partial turn's tokens.
//
// The partial turn carries tokens only when the server streamed them
// before the failure: OpenAI sends the usage on the last chunk (with
// StreamOptions.IncludeUsage), so a stream cut short there has none, while
// a server that streams running totals on every chunk (vLLM's
// continuous_usage_stats) has those of the last chunk it sent. A partial
// completion with nothing in it (the stream failed before its first
// chunk) reports only the error event. With a nil err it is [Observe]. A
// nil run is told nothing.
func ObserveStreamError(run *middleware.Run, partial *openai.ChatCompletion, err error) (termination.Cause, bool) {
	if run == nil {
		return nil, false
	}
	if err == nil {
		return Observe(run, partial)
	}
	model := ""
	if partial != nil {
		model = partial.Model
	}
	if partial != nil && begun(partial) {
		turn := termination.Event{
			Kind:   termination.KindMessage,
			Source: model,
			Model:  model,
			Usage:  termination.Usage{InputTokens: partial.Usage.PromptTokens, OutputTokens: partial.Usage.CompletionTokens},
		}
		if len(partial.Choices) > 0 {
			turn.Text = partial.Choices[0].Message.Content
		}
		if cause, stop := run.Observe(turn); stop {
			return cause, true
		}
	}
	return run.Observe(termination.Event{Kind: termination.KindError, Source: model, Err: err.Error()})
}

// begun reports whether a partial completion holds anything of a turn.
func begun(c *openai.ChatCompletion) bool {
	return c.ID != "" || len(c.Choices) > 0 || c.Usage.PromptTokens != 0 || c.Usage.CompletionTokens != 0
}
