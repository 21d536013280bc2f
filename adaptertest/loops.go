package adaptertest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// Loop runs one of an adapter's tool loops over a provider's SDK: under
// run, with a client of the scripted server s, from prompt, until the loop
// ends; it returns the run's result (run.Finish or run.Wait). It is what
// the scenario checks for SDK adapters ([CheckStopCancelsLoop],
// [CheckTruncatedAnswer]) drive.
type Loop func(ctx context.Context, run *middleware.Run, s *Server, prompt string) termination.Result

// CheckStopCancelsLoop checks that agentstop's stop reaches the requests
// of loop: a run stopped from outside before the loop starts, against a
// server of api whose model would call a tool forever, ends as
// Cancelled{external} without a request to the model. It returns an error
// naming what is wrong.
func CheckStopCancelsLoop(t testing.TB, api API, loop Loop) error {
	t.Helper()
	m := api.Serve(t, true, NewTurn("", 1, 1, "echo", `{}`))
	stage, _ := NewStage(t, "adaptertest_stop", "{}")
	ctx, run := stage.Start(t.Context())
	run.Stop("user pressed stop")
	res := loop(ctx, run, m, "go")
	var c termination.Cancelled
	if !errors.As(res.Cause, &c) || c.Reason != termination.CancelExternal {
		return fmt.Errorf("cause = %#v, want Cancelled{external}", res.Cause)
	}
	if got := m.Requests(); got != 0 {
		return fmt.Errorf("model calls = %d after a stop before the loop started, want 0", got)
	}
	return nil
}

// CheckTruncatedAnswer checks that loop ends a turn that is not an answer:
// against a server of api whose only turn is cut off at the token limit
// (stop is the API's stop or finish reason for it: "max_tokens",
// "length"), the run must end as Failed{stream_error} with wantErr as its
// error text, after one iteration that counted the turn's 5 input and 1024
// output tokens. It returns the events the stage evaluated, for checks of
// the adapter's own, and an error naming what is wrong.
func CheckTruncatedAnswer(t testing.TB, api API, stop, wantErr string, loop Loop) (*Events, error) {
	t.Helper()
	m := api.Serve(t, false, Turn{Text: "the answer is", Usage: termination.Usage{InputTokens: 5, OutputTokens: 1024}, Stop: stop})
	stage, events := NewStage(t, "adaptertest_truncated", "{}")
	ctx, run := stage.Start(t.Context())
	res := loop(ctx, run, m, "long question")
	var failed termination.Failed
	if !errors.As(res.Cause, &failed) || failed.Reason != termination.FailStreamError || failed.Err != wantErr {
		return events, fmt.Errorf("cause = %#v, want Failed{stream_error, %q}", res.Cause, wantErr)
	}
	if res.Tokens != (termination.Usage{InputTokens: 5, OutputTokens: 1024}) || res.Iterations != 1 {
		return events, fmt.Errorf("tokens, iterations = %+v, %d; want 5 in, 1024 out, 1", res.Tokens, res.Iterations)
	}
	return events, nil
}
