package adaptertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// Loop runs one of an adapter's tool loops over a provider's SDK: under
// run, with a client of the scripted server s, from prompt, until the loop
// ends; it returns the run's result (run.Finish or run.Wait). It is what
// the scenario checks for SDK adapters ([API.CheckNaturalCompletion],
// [API.CheckStopCancelsLoop], [API.CheckTruncatedAnswer]) drive.
type Loop func(ctx context.Context, run *middleware.Run, s *Server, prompt string) termination.Result

// CheckStopCancelsLoop checks that agentstop's stop reaches the requests
// of loop: a run stopped from outside before the loop starts, against a
// server of the API whose model would call a tool forever, ends as
// Cancelled{external} without a request to the model. It returns an error
// naming what is wrong.
func (a API) CheckStopCancelsLoop(t testing.TB, loop Loop) error {
	t.Helper()
	m := a.Serve(t, true, NewTurn("", 1, 1, "echo", `{}`))
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
// against a server of the API whose only turn is cut off at the token limit
// (stop is the API's stop or finish reason for it: "max_tokens",
// "length"), the run must end as Failed{stream_error} with wantErr as its
// error text, after one iteration that counted the turn's 5 input and 1024
// output tokens. It returns the events the stage evaluated, for checks of
// the adapter's own, and an error naming what is wrong.
func (a API) CheckTruncatedAnswer(t testing.TB, stop, wantErr string, loop Loop) (*Events, error) {
	t.Helper()
	m := a.Serve(t, false, Turn{Text: "the answer is", Usage: termination.Usage{InputTokens: 5, OutputTokens: 1024}, Stop: stop})
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

// LoopTraits is what [API.CheckNaturalCompletion] expects of an adapter's
// loop and its API's scripted server.
type LoopTraits struct {
	// Model is the model name the scripted server answers with; message
	// and final events carry it as their Model and Source.
	Model string
	// Input says that the loop reports the prompt as an input event
	// before the first message.
	Input bool
	// CallID returns the id the scripted server gives the i-th tool call
	// of its n-th response (both 0-based).
	CallID func(n, i int) string
	// ResultIDs says that the loop's tool results carry their call's id
	// (a framework that does not give tools their call's id reports none).
	ResultIDs bool
}

// CheckNaturalCompletion runs loop against a server of the API that
// answers with [Completion]; the loop's tools must fail for the tool named "fail"
// with the error text "tool fail failed". It checks that the run completes
// naturally, that every token, iteration and tool call is counted once,
// and that the events are the conversation's, in order (input, if
// reported; message, tool_call ×2, tool_result ×2; message, tool_call,
// tool_result; final), with their texts, usage, tools, arguments, call ids
// and model. It returns an error listing what is wrong.
func (a API) CheckNaturalCompletion(t testing.TB, loop Loop, traits LoopTraits) error {
	t.Helper()
	m := a.Serve(t, false, Completion.Turns...)
	stage, rec := NewStage(t, "adaptertest_completion", "{max_tool_calls: 10, max_iterations: 10}")
	ctx, run := stage.Start(t.Context())
	res := loop(ctx, run, m, Completion.Input)

	if _, ok := res.Cause.(termination.NaturalCompletion); !ok {
		return fmt.Errorf("cause = %#v, want NaturalCompletion", res.Cause)
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if res.Tokens != (termination.Usage{InputTokens: 450, OutputTokens: 55}) {
		fail("tokens = %+v, want 450 in, 55 out", res.Tokens)
	}
	if res.Iterations != 3 || res.ToolCalls != 3 {
		fail("iterations, tool calls = %d, %d, want 3, 3", res.Iterations, res.ToolCalls)
	}
	want := []string{"message", "tool_call", "tool_call", "tool_result", "tool_result",
		"message", "tool_call", "tool_result", "final"}
	if traits.Input {
		want = append([]string{"input"}, want...)
	}
	if got := rec.Kinds(); !slices.Equal(got, want) {
		return errors.Join(append(errs, fmt.Errorf("events = %v, want %v", got, want))...)
	}
	all := rec.All()
	ev := all[len(all)-9:] // after the input event, if any
	if ev[0].Text != "let me look" || ev[0].Usage != (termination.Usage{InputTokens: 100, OutputTokens: 20}) || ev[0].Source != traits.Model {
		fail("first message = %+v", ev[0])
	}
	if ev[1].Tool != "search" || string(ev[1].Args) != `{"q":"a"}` {
		fail("tool call = %+v (args %s)", ev[1], ev[1].Args)
	}
	if ev[0].Model != traits.Model || ev[8].Model != traits.Model {
		fail("model of the turns = %q, %q; want %q", ev[0].Model, ev[8].Model, traits.Model)
	}
	if traits.CallID != nil {
		// event: (response, call) of its id
		calls := map[int][2]int{1: {0, 0}, 2: {0, 1}, 3: {0, 0}, 4: {0, 1}, 6: {1, 0}, 7: {1, 0}}
		for i := range ev {
			c, ok := calls[i]
			want := ""
			if ok && (ev[i].Kind == termination.KindToolCall || traits.ResultIDs) {
				want = traits.CallID(c[0], c[1])
			}
			if ev[i].CallID != want {
				fail("event %d (%s) call_id = %q, want %q", i, ev[i].Kind, ev[i].CallID, want)
			}
		}
	}
	if !ev[1].Usage.IsZero() || !ev[3].Usage.IsZero() {
		fail("usage on a tool event: %+v, %+v", ev[1], ev[3])
	}
	if ev[7].Tool != "fail" || ev[7].Err != "tool fail failed" {
		fail("failed tool result = %+v", ev[7])
	}
	if ev[8].Text != "the answer is 42" {
		fail("final = %+v", ev[8])
	}
	if got := m.Requests(); got != 3 {
		fail("model calls = %d, want 3", got)
	}
	return errors.Join(errs...)
}
